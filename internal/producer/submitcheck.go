package producer

import (
	"context"
	"errors"
	"time"

	"github.com/agentq/agentq/internal/spec"
)

// checkSubmit is what a submit refuses once its input is final, before
// anything is written (ErrInvalidSpec, a SpecError a problem): a deadline
// of under 1s or over limits.max_wait (given beside the spec, with
// WithDeadline, or set on the spec after it was parsed, as enqueue
// --deadline does), and what the spec's templates over the input alone
// make (spec.CheckInput: concurrency keys, signal matches, the lists of
// maps over the input).
func (c *Client) checkSubmit(ctx context.Context, wspec *spec.Spec, set SubmitSettings) error {
	var errs []error
	d, given := set.Deadline, " (given with the submit)"
	if d == 0 {
		d, given = time.Duration(wspec.Deadline), ""
	}
	if max := c.o.Limits.MaxWait; d != 0 {
		switch {
		case d < time.Second:
			errs = append(errs, &spec.SpecError{Where: "deadline", Msg: spec.ShowDuration(d) + given + " is under 1s"})
		case max > 0 && d > max:
			errs = append(errs, &spec.SpecError{Where: "deadline", Msg: spec.ShowDuration(d) + given + " is over limits.max_wait (" + spec.ShowDuration(max) + ")"})
		}
	}
	errs = append(errs, spec.CheckInput(ctx, wspec, c.o.Limits))
	return errors.Join(errs...)
}
