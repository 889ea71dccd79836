package app

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// AdKeys names the configuration's provider keys by fingerprint and key
// id, in configuration order: what a worker advertises and what a client
// with keys in its own configuration knows. Never the keys.
func AdKeys(cfg config.Config) []store.AdKey {
	var out []store.AdKey
	for _, p := range cfg.Providers {
		for i, k := range p.Keys {
			out = append(out, store.AdKey{Provider: p.Name, Fingerprint: llmclient.Fingerprint(p.Name, i, k.Reveal()), ID: llmclient.KeyID(k.Reveal())})
		}
	}
	return out
}

// ErrUnknownKey wraps a key reference that names no known key.
var ErrUnknownKey = store.ErrUnknownKey

// Keys lists the provider keys the live workers advertise, and those cfg
// holds, with their shared state (never a key: names and fingerprints).
func Keys(ctx context.Context, rdb redis.UniversalClient, cfg config.Config) ([]record.KeyInfo, error) {
	return store.NewFleet(rdb, nil).FleetKeys(ctx, AdKeys(cfg))
}

// EnableKey re-enables, for every worker, the key ref names (a whole
// fingerprint, or its provider#N when that names one key): it was
// disabled (quota, auth) or cooling. It reports whether it changed
// anything; ErrUnknownKey when ref names no key.
func EnableKey(ctx context.Context, rdb redis.UniversalClient, cfg config.Config, ref string) (bool, error) {
	res, err := store.NewFleet(rdb, nil).EnableKeys(ctx, AdKeys(cfg), ref, false)
	return len(res.Enabled) > 0, err
}
