package cli

import (
	"errors"
	"fmt"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/problem"
)

// submitErr is a refused submit: one line per step no live worker serves
// (exit 2), or exit 5 when no worker is alive at all. A problem without a
// source (found by a dashboard, --server) is put on spec's file and line.
func submitErr(source string, spec *engine.Spec, err error) error {
	switch {
	case errors.Is(err, engine.ErrNoWorkers):
		return &ExitError{Code: ExitNoWorkers, Err: fmt.Errorf("submit %s: %w; --no-check submits anyway (the workflow waits for a worker)", source, err)}
	case errors.Is(err, engine.ErrInvalidSpec):
		var out []error
		for _, e := range problem.Split(err) {
			var se *engine.SpecError
			if errors.As(e, &se) && se.Source == "" {
				se.Source = source
				if se.Line == 0 {
					se.Line = spec.LineOf(se.Where)
				}
			}
			out = append(out, e)
		}
		return &ExitError{Code: ExitUsage, Err: errors.Join(out...)}
	}
	return fmt.Errorf("submit %s: %w", source, err)
}
