package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
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

func TestUsageAndCost(t *testing.T) {
	wf := &Workflow{Steps: []StepRecord{
		{Target: "oa/m", Usage: store.Usage{PromptTokens: 1000, CompletionTokens: 500}},
		{Target: "an/m", Usage: store.Usage{PromptTokens: 2000, CompletionTokens: 0}},
		{Target: "template"}, // a degraded answer uses no tokens and needs no price
	}}
	if u := Usage(wf); u.PromptTokens != 3000 || u.CompletionTokens != 500 {
		t.Fatalf("usage %+v", u)
	}
	prices := map[string]Price{"oa/m": {PromptPerMTok: 2, CompletionPerMTok: 8}, "an/m": {PromptPerMTok: 3, CompletionPerMTok: 15}}
	if c, ok := Cost(wf, prices); !ok || math.Abs(c-(0.002+0.004+0.006)) > 1e-12 {
		t.Fatalf("cost %v %v", c, ok)
	}
	delete(prices, "an/m")
	if _, ok := Cost(wf, prices); ok {
		t.Fatal("a cost without every target's price")
	}
}
