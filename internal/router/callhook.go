package router

import (
	"context"
	"time"

	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// CallReport is what a call hook hears of one call to one target: a
// route's attempt that failed over makes one report per target tried, a
// hedge one per call it sent.
type CallReport struct {
	Route  string
	Target Target
	// Key is the fingerprint of the key the call used ("" before one was
	// chosen), never the key.
	Key     string
	Class   retry.Class // retry.OK for an answer
	Latency time.Duration
	Usage   llmclient.Usage
	// Request is what was asked; Response what was answered (nil on a
	// failure; a stream's carries no text, its pieces come later).
	Request  llmclient.Request
	Response *llmclient.Response
}

type callHookKey struct{}

// WithCallHook returns ctx with fn hearing every call the router makes
// under it, after the call and before the router goes on; fn must not
// block for long.
func WithCallHook(ctx context.Context, fn func(CallReport)) context.Context {
	return context.WithValue(ctx, callHookKey{}, fn)
}

func callHookOf(ctx context.Context) func(CallReport) {
	fn, _ := ctx.Value(callHookKey{}).(func(CallReport))
	return fn
}
