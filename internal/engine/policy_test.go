package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

func TestRetryPolicy(t *testing.T) {
	p := RetryPolicy{Backoff: retry.DefaultBackoff, Random: func() float64 { return 0.5 }}
	cases := []struct {
		name    string
		n       int
		err     error
		delay   time.Duration
		failure bool
	}{
		{"plain error", 0, errors.New("x"), time.Second, true},
		{"backoff grows", 3, &StepError{Class: retry.Server}, 8 * time.Second, true},
		{"retry-after over backoff waits for it, plus asynq's second", 0, &StepError{Class: retry.RateLimited, RetryAfter: 5 * time.Second}, 6 * time.Second, true},
		{"retry-after under backoff", 4, &StepError{Class: retry.RateLimited, RetryAfter: 5 * time.Second}, 16 * time.Second, true},
		{"free rate-limit wait", 0, &StepError{Class: retry.RateLimited, RetryAfter: 2 * time.Second, Free: true}, 3 * time.Second, false},
		{"canceled", 2, fmt.Errorf("wrapped: %w", &StepError{Class: retry.Canceled}), time.Second, false},
		{"busy duplicate", 0, &StepError{Class: retry.Busy, RetryAfter: 300 * time.Millisecond}, 300 * time.Millisecond, false},
	}
	for _, c := range cases {
		if d := p.RetryDelay(c.n, c.err, asynq.NewTask(tasks.TypeStep, nil)); d != c.delay {
			t.Errorf("%s: delay %s, want %s", c.name, d, c.delay)
		}
		if f := p.IsFailure(c.err); f != c.failure {
			t.Errorf("%s: IsFailure %v, want %v", c.name, f, c.failure)
		}
	}
}

// classed is a step function's error that claims a class.
type classed struct{ c retry.Class }

func (e classed) Error() string      { return "claims " + string(e.c) }
func (e classed) Class() retry.Class { return e.c }

// A step function's error keeps a provider's class it passed on, but not
// one of the worker's free classes: a step that said busy would never use
// up a retry.
func TestAStepCannotClaimAFreeClass(t *testing.T) {
	for c, want := range map[retry.Class]retry.Class{retry.Busy: retry.Handler, retry.NotServed: retry.Handler, retry.RateLimited: retry.RateLimited,
		retry.Canceled: retry.Handler} { // canceled, while the step's context runs
		_, err := callStep(t.Context(), func(context.Context, *CodeStep) (any, error) { return nil, classed{c} }, &CodeStep{})
		if got := classOf(err); got != want {
			t.Errorf("a step's error claiming %s is %s, want %s", c, got, want)
		}
	}
}
