package router

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// KeyStatus is what is known of one key.
type KeyStatus struct {
	CoolUntil time.Time // cooling (rate limited) until then
	Disabled  string    // taken out (auth, quota) for this reason until re-enabled
}

// KeyStateStore shares key state between workers (a 429 cools a
// key cluster-wide; quota and auth failures disable it cluster-wide).
type KeyStateStore interface {
	Cool(ctx context.Context, provider, keyID string, until time.Time) error
	Disable(ctx context.Context, provider, keyID, reason string) error
	// Load returns provider -> key id -> status for the given providers.
	Load(ctx context.Context, providers []string) (map[string]map[string]KeyStatus, error)
}

// KeyPools decides which keys a call may use. Reads come from a local copy
// (no Redis round trip on the call path); changes go to the local copy at
// once and to the shared store; Refresh (every second, and whenever
// another worker announces a change) brings the others' changes in.
type KeyPools struct {
	store KeyStateStore // nil: this process only
	now   func() time.Time
	log   *slog.Logger

	mu    sync.RWMutex
	state map[string]map[string]KeyStatus
}

// NewKeyPools returns pools backed by store (nil: local only).
func NewKeyPools(store KeyStateStore, now func() time.Time, log *slog.Logger) *KeyPools {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &KeyPools{store: store, now: now, log: log, state: map[string]map[string]KeyStatus{}}
}

// check says whether a key may be used now; if not, until when it cools
// (zero if it is disabled). It allocates nothing: it is on the call path.
func (k *KeyPools) check(provider, keyID string, now time.Time) (ok bool, coolUntil time.Time, disabled bool) {
	k.mu.RLock()
	s := k.state[provider][keyID]
	k.mu.RUnlock()
	switch {
	case s.Disabled != "":
		return false, time.Time{}, true
	case s.CoolUntil.After(now):
		return false, s.CoolUntil, false
	}
	return true, time.Time{}, false
}

func (k *KeyPools) set(provider, keyID string, f func(*KeyStatus)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state[provider] == nil {
		k.state[provider] = map[string]KeyStatus{}
	}
	s := k.state[provider][keyID]
	f(&s)
	k.state[provider][keyID] = s
}

// Cool marks a key cooling until until, here and for every worker.
func (k *KeyPools) Cool(ctx context.Context, provider, keyID string, until time.Time) {
	k.set(provider, keyID, func(s *KeyStatus) {
		if until.After(s.CoolUntil) {
			s.CoolUntil = until
		}
	})
	if k.store != nil {
		if err := k.store.Cool(ctx, provider, keyID, until); err != nil {
			k.log.Warn("could not share a key cooldown; other workers may hit the key", "provider", provider, "err", err)
		}
	}
}

// Disable takes a key out, here and for every worker.
func (k *KeyPools) Disable(ctx context.Context, provider, keyID, reason string) {
	k.set(provider, keyID, func(s *KeyStatus) { s.Disabled = reason })
	if k.store != nil {
		if err := k.store.Disable(ctx, provider, keyID, reason); err != nil {
			k.log.Warn("could not share a key disable; other workers may use the key", "provider", provider, "err", err)
		}
	}
}

// Refresh replaces the local copy with the shared state of providers.
func (k *KeyPools) Refresh(ctx context.Context, providers []string) error {
	if k.store == nil {
		return nil
	}
	st, err := k.store.Load(ctx, providers)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range providers {
		k.state[p] = st[p]
	}
	return nil
}

// Run refreshes providers every interval and whenever poke receives, until
// ctx ends.
func (k *KeyPools) Run(ctx context.Context, providers []string, interval time.Duration, poke <-chan struct{}) {
	runRefresh(ctx, interval, poke, func() error { return k.Refresh(ctx, providers) }, k.log, "key")
}
