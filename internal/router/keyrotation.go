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
func (r *Router) callKeys(ctx context.Context, route string, t Target, req ask, probe bool, rerr *RouteError) (*answer, error) {
	name := t.Provider.Name()
	kp, ok := t.Provider.(llmclient.KeyedProvider)
	if !ok {
		release, err := r.acquire(ctx, name, t)
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
		release, lerr := r.acquire(ctx, name, t)
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
		err = r.probeEmpty500(kctx, t, err)
		rerr.Attempts = append(rerr.Attempts, err)
		switch class := retry.ClassOf(err); class.Rule().Key {
		case retry.KeyCool:
			wait := r.defCool
			if e, ok := llmclient.AsError(err); ok && e.RetryAfter > 0 {
				wait = e.RetryAfter
			}
			until := r.now().Add(min(wait, r.maxCool))
			r.keys.Cool(ctx, name, id, until)
			r.obs.KeyEvent(name, keyName(t.Provider, k), "cooldown")
			if earliest.IsZero() || until.Before(earliest) {
				earliest = until
			}
		case retry.KeyDisabled:
			r.keys.Disable(ctx, name, id, string(class)+": "+oneLine(err.Error(), 200))
			r.obs.KeyEvent(name, keyName(t.Provider, k), "disabled")
			r.log.Error("API key disabled for every worker until re-enabled", "provider", name,
				"key", keyName(t.Provider, k), "class", string(class), "alert", true)
		default:
			return nil, err
		}
	}
	if !tried {
		if probe {
			r.breakers.Record(ctx, name, t.Model, retry.Canceled, true) // give the probe slot back
		}
		err = &SkippedError{Target: t.String(), Reason: SkipKeysCooling, Until: earliest, class: retry.RateLimited}
		if allDisabled {
			err = &SkippedError{Target: t.String(), Reason: SkipKeysDisabled, class: retry.Auth}
		}
		rerr.Attempts = append(rerr.Attempts, err)
	}
	return nil, err
}
