package cli

import (
	"errors"
	"fmt"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/spec"
)

// submitErr is a refused submit: one line per step no live worker serves
// (exit 2), or exit 5 when no worker is alive at all. A problem without a
// source (found by a dashboard, --server) is put on spec's file and line.
func submitErr(source string, wspec *spec.Spec, err error) error {
	switch {
	case errors.Is(err, agentq.ErrNoWorkers):
		return &ExitError{Code: ExitNoWorkers, Err: fmt.Errorf("submit %s: %w; --no-check submits anyway (the workflow waits for a worker)", source, err)}
	case errors.Is(err, spec.ErrInvalidSpec):
		var out []error
		for _, e := range problem.Split(err) {
			var se *spec.SpecError
			if errors.As(e, &se) && se.Source == "" {
				se.Source = source
				if se.Line == 0 {
					se.Line = wspec.LineOf(se.Where)
				}
			}
			out = append(out, e)
		}
		return &ExitError{Code: ExitUsage, Err: errors.Join(out...)}
	}
	return fmt.Errorf("submit %s: %w", source, err)
}
