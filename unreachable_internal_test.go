package agentq

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/problem"
)

// wrap adds ErrUnreachable to an unanswered call's error and changes
// nothing else: its text, what it matches, its lines (a joined error is
// still one line a part); any other error is returned as it is.
func TestWrapOnlyAddsErrUnreachable(t *testing.T) {
	single := fmt.Errorf("reading wf_x: %w", flow.ErrUnavailable)
	joined := fmt.Errorf("waiting for workflow wf_x: %w: %w", flow.ErrUnavailable, errors.New("dial tcp: refused"))
	for _, err := range []error{single, joined} {
		w := wrap(err)
		if !errors.Is(w, ErrUnreachable) || !errors.Is(w, flow.ErrUnavailable) || w.Error() != err.Error() {
			t.Errorf("wrap(%q) = %q: want ErrUnreachable, ErrUnavailable and the same text", err, w)
		}
		if got, want := problem.Lines(w), problem.Lines(err); !slices.Equal(got, want) {
			t.Errorf("wrap(%q) has lines %q, want %q", err, got, want)
		}
	}
	for _, err := range []error{nil, ErrNotFound, fmt.Errorf("x: %w", ErrNoSpec)} {
		if w := wrap(err); w != err {
			t.Errorf("wrap(%v) = %v, want it unchanged", err, w)
		}
	}
}
