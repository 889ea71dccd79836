package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A step waiting out a backoff says when its next attempt is due (it read
// as "running, attempts=1" like a running one); the due time is the one
// asynq holds the task to, and it is no longer shown once the attempt runs.
func TestAStepInBackoffSaysWhenItsNextAttemptIsDue(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"later": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.Attempt() == 1 {
				return nil, engine.RetryAfter(20*time.Second, errors.New("the service is busy"))
			}
			return "ok", nil
		}}})
	id := e.Submit(t, e.Spec("name: backoff\nsteps:\n  - { id: s, run: later }\n"))
	var due time.Time
	poll.Until(t, 20*time.Second, func() (bool, string) {
		wf, err := e.Client.Status(t.Context(), id)
		if err != nil || wf.Steps[0].NextAttemptAt == nil {
			return false, "no next attempt shown"
		}
		due = *wf.Steps[0].NextAttemptAt
		return wf.Steps[0].State == store.StepRunning && wf.Steps[0].Attempts == 1, "step " + wf.Steps[0].State
	})
	if left := time.Until(due); left < 15*time.Second || left > 22*time.Second {
		t.Fatalf("next attempt due in %s, want about the 20s the step asked for (plus asynq's second)", left)
	}
	retries, err := asynq.NewInspectorFromRedisClient(e.Redis).ListRetryTasks("default")
	if err != nil || len(retries) != 1 || retries[0].NextProcessAt.Sub(due).Abs() > 2*time.Second {
		t.Fatalf("asynq's retry %+v (%v), want it due at %s", retries, err, due)
	}
}
