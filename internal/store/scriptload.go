package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Scripts are sent by their SHA (EVALSHA), never with their text: Redis
// hashes an EVAL's whole text at every call, and the text (a few KiB for
// the scripts that log events) is written on the connection every time.
// A script run alone (Script.Run) falls back on EVAL when Redis answers
// NOSCRIPT, and Redis keeps it from then on. A script sent in a pipeline
// cannot fall back (its reply comes after the rest of the round trip):
// those scripts are loaded (SCRIPT LOAD, on every primary of a Cluster)
// before the store first sends one, and a round trip answered NOSCRIPT
// (the server was restarted, flushed its scripts or failed over to a
// replica that never ran them) loads them again and is sent again: it
// wrote nothing but what it is written to write again (see bySHA).

// pipelinedScripts are the scripts the store sends in pipelines.
var pipelinedScripts = []*redis.Script{createScript}

// loadScripts loads pipelinedScripts unless this store loaded them.
func (s *Store) loadScripts(ctx context.Context) error {
	if s.scriptsLoaded.Load() {
		return nil
	}
	for _, sc := range pipelinedScripts {
		if err := loadScript(ctx, s.rdb, sc); err != nil {
			return fmt.Errorf("load the store's scripts: %w", err)
		}
	}
	s.scriptsLoaded.Store(true)
	return nil
}

// loadScript loads sc where scripts run: on a Cluster, on every primary
// only (go-redis's ScriptLoad asks every node, replicas too, so one
// replica cut off would fail a create its primary confirms; a replica
// promoted later answers NOSCRIPT once, and bySHA loads it then).
func loadScript(ctx context.Context, rdb redis.UniversalClient, sc *redis.Script) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return sc.Load(ctx, rdb).Err()
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return sc.Load(ctx, m).Err()
	})
}

// bySHA sends a round trip that holds scripts by their SHA, and once
// more, the scripts loaded again, when Redis answers NOSCRIPT. The round
// trip must be one that may be sent twice: a script answered NOSCRIPT did
// not run, and what ran beside it is idempotent.
func (s *Store) bySHA(ctx context.Context, send func() error) error {
	err := send()
	if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return err
	}
	s.scriptsLoaded.Store(false)
	if lerr := s.loadScripts(ctx); lerr != nil {
		return fmt.Errorf("%w (after %w)", lerr, err)
	}
	return send()
}
