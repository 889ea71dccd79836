package agentq

import (
	"errors"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/flow"
)

// ErrUnreachable is matched (errors.Is) by an error of NewClient or of a
// Client's method that says Redis, or over a server (NewServerClient) the
// dashboard, could not be reached or cannot serve now — a connection
// refused, reset or timed out, a failover or CLUSTERDOWN under way,
// ErrUnavailable — as opposed to an answer. It says nothing about the
// workflows, which go on on the workers: try again later (the enqueue
// command exits 3). A change sent to a server whose connection dropped
// before the answer matches it too (but not ErrUnavailable): the change
// may have been made, and the error says so.
var ErrUnreachable = errors.New("agentq: Redis (or the dashboard) cannot be reached")

// unreachable reports an error that says Redis or the dashboard did not
// answer.
func unreachable(err error) bool {
	return errors.Is(err, client.ErrRedisUnreachable) || errors.Is(err, apiclient.ErrUnreachable) || flow.Unavailable(err)
}

// wrap makes an error that says Redis or the dashboard did not answer
// match ErrUnreachable, its text and what else it matches unchanged;
// other errors (and nil) are returned as they are.
func wrap(err error) error {
	if err == nil || !unreachable(err) {
		return err
	}
	if _, joined := err.(interface{ Unwrap() []error }); joined {
		return &unreachableErrs{err}
	}
	return &unreachableErr{err}
}

// wrapped is wrap for a method's two results.
func wrapped[T any](v T, err error) (T, error) { return v, wrap(err) }

// unreachableErr is an error that matches ErrUnreachable.
type unreachableErr struct{ err error }

func (e *unreachableErr) Error() string        { return e.err.Error() }
func (e *unreachableErr) Unwrap() error        { return e.err }
func (e *unreachableErr) Is(target error) bool { return target == ErrUnreachable }

// unreachableErrs is unreachableErr for an error that joins several (its
// parts are still split out, one a line, by whoever splits them).
type unreachableErrs struct{ err error }

func (e *unreachableErrs) Error() string        { return e.err.Error() }
func (e *unreachableErrs) Unwrap() []error      { return []error{e.err} }
func (e *unreachableErrs) Is(target error) bool { return target == ErrUnreachable }
