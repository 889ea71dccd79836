package router

// Key rotation: one target's usable keys in turn, cooling and disabling
// keys for every worker on key-level failures.

import (
	"context"
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/retry"
)

// callKeys calls one target with the provider's usable keys in turn,
// each call under the provider's limits (limits.go): on a key-level
// failure it cools (rate limit) or disables (quota, auth) the key for
// every worker and tries the next key at once. probe says the call is the
// target's half-open breaker probe.
func (r *Router) callKeys(ctx context.Context, route string, t *Target, req *ask, probe bool, rerr *RouteError) (*answer, error) {
	name := t.Provider.Name()
	kp, ok := t.Provider.(llmclient.KeyedProvider)
	if !ok {
		release, err := r.acquire(ctx, name, *t)
		if err != nil {
			rerr.Attempts = append(rerr.Attempts, err)
			return nil, err
		}
		resp, err := r.call(ctx, route, t, 0, req, probe)
		releaseAfter(resp, release)
		if err != nil {
			rerr.Attempts = append(rerr.Attempts, err)
		}
		return resp, err
	}
	ids := kp.KeyIDs()
	var (
		err         error
		earliest    time.Time
		allDisabled = true
		tried       bool
	)
	for k, id := range ids {
		ok, until, disabled := r.keys.check(name, id, r.now())
		if !ok {
			allDisabled = allDisabled && disabled
			if !disabled && (earliest.IsZero() || until.Before(earliest)) {
				earliest = until
			}
			continue
		}
		if tried {
			r.obs.KeyEvent(name, keyName(t.Provider, k), "rotated")
		}
		allDisabled, tried = false, true
		release, lerr := r.acquire(ctx, name, *t)
		if lerr != nil {
			if probe {
				r.breakers.Record(ctx, name, t.Model, retry.Canceled, true) // give the probe slot back
			}
			rerr.Attempts = append(rerr.Attempts, lerr)
			return nil, lerr
		}
		kctx := llmclient.WithKey(ctx, k)
		var resp *answer
		resp, err = r.call(kctx, route, t, k, req, probe)
		releaseAfter(resp, release)
		if err == nil {
			return resp, nil
		}
		err = r.probeEmpty500(kctx, *t, err)
		rerr.Attempts = append(rerr.Attempts, err)
		until, next := r.keyFailed(ctx, name, id, t, k, err)
		if !next {
			return nil, err
		}
		if !until.IsZero() && (earliest.IsZero() || until.Before(earliest)) {
			earliest = until
		}
	}
	if !tried {
		err = r.noKey(ctx, t, probe, earliest, allDisabled)
		rerr.Attempts = append(rerr.Attempts, err)
	}
	return nil, err
}

// keyFailed handles a call's failure err with key k (id) of provider
// name: a rate limit cools the key until the time returned, a refused key
// is disabled; next says the next key is tried (false: err is not the
// key's).
//
//go:noinline
func (r *Router) keyFailed(ctx context.Context, name, id string, t *Target, k int, err error) (until time.Time, next bool) {
	switch class := retry.ClassOf(err); class.Rule().Key {
	case retry.KeyCool:
		wait := r.defCool
		if e, ok := llmclient.AsError(err); ok && e.RetryAfter > 0 {
			wait = e.RetryAfter
		}
		until = r.now().Add(min(wait, r.maxCool))
		r.keys.Cool(ctx, name, id, until)
		r.obs.KeyEvent(name, keyName(t.Provider, k), "cooldown")
		return until, true
	case retry.KeyDisabled:
		r.keys.Disable(ctx, name, id, string(class)+": "+oneLine(err.Error(), 200))
		r.obs.KeyEvent(name, keyName(t.Provider, k), "disabled")
		r.log.Error("API key disabled for every worker until re-enabled", "provider", name,
			"key", keyName(t.Provider, k), "class", string(class), "alert", true)
		return time.Time{}, true
	default:
		return time.Time{}, false
	}
}

// noKey is the skip of target t when none of its keys could be tried:
// all cooling (until earliest) or all disabled.
//
//go:noinline
func (r *Router) noKey(ctx context.Context, t *Target, probe bool, earliest time.Time, allDisabled bool) error {
	if probe {
		r.breakers.Record(ctx, t.Provider.Name(), t.Model, retry.Canceled, true) // give the probe slot back
	}
	if allDisabled {
		return &SkippedError{Target: t.String(), Reason: SkipKeysDisabled, class: retry.Auth}
	}
	return &SkippedError{Target: t.String(), Reason: SkipKeysCooling, Until: earliest, class: retry.RateLimited}
}
