package engine

import (
	"time"

	"github.com/agentq/agentq/retry"
)

// StepEvent reports a settled step, or (State "retrying") a failed attempt
// that will be retried, or (State "unrecorded") an answer that could not be
// recorded and is kept in memory for the step's next attempt, or (State
// "queued", with Reconciled) a step the reconciler enqueued again.
type StepEvent struct {
	// Step is empty for an event of the workflow itself: one that its
	// deadline ended (State and WorkflowState "timed_out"), sent once.
	Workflow, Step, Route, State, WorkflowState string
	Target                                      string // provider/model that answered, or "template"
	Degraded                                    bool
	Attempt                                     int
	Class                                       retry.Class
	Err                                         error
	RetryAfter                                  time.Duration // the provider's ask, for "retrying"
	// Reconciled is set when the reconciler, not a handler, settled the
	// step (or enqueued it again): why, e.g. "lease_expired".
	Reconciled string
	// HandedOff is set when the attempt ran as a hand-off: on the worker
	// that settled its predecessor, without waiting for a poll.
	HandedOff bool
}
