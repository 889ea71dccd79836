package app

import (
	"github.com/agentq/agentq/internal/config"
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
