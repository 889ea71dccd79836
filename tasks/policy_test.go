package tasks

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/retry"
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
		{"busy duplicate", 0, &StepError{Class: classBusy, RetryAfter: 300 * time.Millisecond}, 300 * time.Millisecond, false},
	}
	for _, c := range cases {
		if d := p.RetryDelay(c.n, c.err, asynq.NewTask(TypeStep, nil)); d != c.delay {
			t.Errorf("%s: delay %s, want %s", c.name, d, c.delay)
		}
		if f := p.IsFailure(c.err); f != c.failure {
			t.Errorf("%s: IsFailure %v, want %v", c.name, f, c.failure)
		}
	}
}
