package router

// Routes: the targets a step may use, in order, and the fallbacks for
// failures that are the request's own.

import (
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/retry"
)

// Target is one provider and model a route may use.
type Target struct {
	Provider llmclient.Provider
	Model    string
	// Timeout bounds one call to this target; the attempt's own deadline
	// bounds it too. Zero means only the attempt's deadline.
	Timeout time.Duration
	// MaxInputBytes, when positive, is the largest request (system prompt
	// and messages) this target takes: a larger one is not sent to it and
	// fails for it as context_length, so the route's context-window
	// fallback (a target with a larger window) can take it.
	MaxInputBytes int
}

func (t Target) String() string { return t.Provider.Name() + "/" + t.Model }

// Route is an ordered list of targets and what to do when they fail.
type Route struct {
	Name                  string
	Targets               []Target
	ContextWindowFallback *Target
	ContentFallback       *Target
	// FallbackText answers steps that accept a degraded answer.
	FallbackText string
	// Strategy is "health" (default: best score first, close scores share
	// traffic) or "ordered" (the configured order).
	Strategy string
	// Hedging: when the first target has not answered after HedgeAfter
	// (or, with HedgeQuantile 0.95 or 0.99, after that quantile of its
	// latency), a second call goes to the next target; the first answer
	// wins and the other call is canceled. Zero for both: no hedging.
	HedgeAfter    time.Duration
	HedgeQuantile float64
}

// fallbackFor is the route's fallback for a request at fault with class c
// (context_length: ContextWindowFallback; content_filter:
// ContentFallback); nil when it has none (bad_request never has one).
func (rt Route) fallbackFor(c retry.Class) *Target {
	switch c {
	case retry.ContextLength:
		return rt.ContextWindowFallback
	case retry.ContentFilter:
		return rt.ContentFallback
	}
	return nil
}

func fallbacks(rt Route) []Target {
	var out []Target
	for _, f := range []*Target{rt.ContextWindowFallback, rt.ContentFallback} {
		if f != nil {
			out = append(out, *f)
		}
	}
	return out
}
