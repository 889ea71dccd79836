package router

// Limits: a provider's cluster-wide concurrency and requests per minute.

import (
	"context"
	"time"

	"github.com/agentq/agentq/retry"
)

// Limit caps a provider's calls across all workers; zero fields: no cap.
type Limit struct{ MaxConcurrency, RPM int }

// Limiter takes a slot for one call to a provider: a concurrency lease
// (released after the call, or lapsing after lease) and a request in the
// sliding minute. ok false: a limit is full for about wait.
type Limiter interface {
	Acquire(ctx context.Context, provider string, maxConcurrency, rpm int, lease time.Duration) (release func(context.Context), wait time.Duration, ok bool, err error)
}

// releaseAfter gives a limit slot back now, or when a streamed answer is
// closed.
func releaseAfter(resp *answer, release func()) {
	if resp != nil && resp.stream != nil {
		resp.stream.onClose(release)
		return
	}
	release()
}

// acquire takes a slot under the provider's cluster-wide limits, if it has
// any. A limiter that cannot be reached lets the call go (and says so):
// Redis trouble must not stop every call.
func (r *Router) acquire(ctx context.Context, provider string, t Target) (func(), error) {
	lim, ok := r.limits[provider]
	if !ok || r.limiter == nil || (lim.MaxConcurrency <= 0 && lim.RPM <= 0) {
		return func() {}, nil
	}
	lease := t.Timeout + 10*time.Second
	release, wait, ok, err := r.limiter.Acquire(ctx, provider, lim.MaxConcurrency, lim.RPM, lease)
	if err != nil {
		r.log.Warn("limits unavailable; sending the call anyway", "provider", provider, "err", err)
		return func() {}, nil
	}
	if !ok {
		// a lease usually ends long before it would lapse: look again soon
		return nil, &SkippedError{Target: t.String(), Reason: SkipLimited, Until: r.now().Add(min(wait, time.Second)), class: retry.RateLimited}
	}
	return func() { release(context.WithoutCancel(ctx)) }, nil
}
