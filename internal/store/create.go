package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// Create writes the workflow record in one script, with w.Roots enqueued
// by the same script when the store EnqueuesTasks; it reports whether it
// enqueued them (if not, the caller does).
func (s *Store) Create(ctx context.Context, w NewWorkflow) (rootsEnqueued bool, err error) {
	fused := s.fused.Load()
	err = s.create(ctx, w, fused)
	if fused && s.crossSlot(err) {
		fused = false
		err = s.create(ctx, w, false)
	}
	return fused && len(w.Roots) > 0 && err == nil, err
}

// create writes w's record. fused: the script also adds the workflow to
// the workflow index and the open index and enqueues its roots (keys of
// other slots than the record's: not on a Cluster); else the index
// entries are separate commands of the same round trip, and the roots
// are the caller's to enqueue.
func (s *Store) create(ctx context.Context, w NewWorkflow, fused bool) error {
	stepsJSON, _ := json.Marshal(w.Steps)
	now := s.now()
	// the record's first field is its id (the script's index entries name it)
	args := []any{s.ttl(), 0, "id", w.ID, "name", w.Name, "state", StatePending, "created_at", ts(now),
		"spec", string(w.Spec), "steps", string(stepsJSON), "nsteps", len(w.Steps), "nsettled", 0, "nfailed", 0, "fanin", fanInLayout}
	if !w.DeadlineAt.IsZero() {
		args = append(args, "deadline_at", ts(w.DeadlineAt))
	}
	if w.IdempotencyKey != "" {
		args = append(args, "idem_key", w.IdempotencyKey)
	}
	if !w.KeyRecord {
		args = append(args, "nokey", "1")
	}
	if w.Parent != nil {
		b, _ := json.Marshal(w.Parent)
		args = append(args, "parent", string(b))
	}
	args[1] = len(args) - 2
	keys := []string{wfKey(w.ID)}
	if fused {
		keys = append(keys, indexKey(), openKey())
		args = append(args, now.UnixMilli())
		for i := range w.Roots {
			if err := s.registerQueue(ctx, w.Roots[i].Queue); err != nil {
				return err
			}
			keys, _ = taskKeys(keys, &w.Roots[i])
			args = append(args, w.Roots[i].ID, w.Roots[i].message())
		}
		args = append(args, s.nowNanos())
	} else {
		args = append(args, "")
	}
	events := []Event{{Type: record.EventSubmitted, Name: w.Name}}
	for _, id := range w.Ready {
		events = append(events, Event{Type: record.EventReady, Step: id})
	}
	keys, args = s.logged(w.ID, now, keys, args, events...)
	// One round trip: the record script, by its SHA (loaded at the
	// store's first create; a server that lost it answers NOSCRIPT,
	// and the script is loaded again and the round trip sent again), and,
	// when the script cannot write them (other slots: a Cluster), the
	// index entries in the same pipeline (a cluster client splits it by
	// slot). An
	// index entry for an id that turns out to be taken points at the
	// existing workflow: harmless.
	//
	// With durability on, the record is confirmed on its primary; on a
	// Cluster the index entries (other slots) are written after it, the
	// open index's confirmed on its own primary (the reconciler walks it).
	_, cluster := s.rdb.(*redis.ClusterClient)
	indexed := func(p redis.Pipeliner) {
		p.ZAdd(ctx, indexKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
		p.ZAdd(ctx, openKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
	}
	if err := s.loadScripts(ctx); err != nil {
		return fmt.Errorf("store: create workflow %s: %w", w.ID, err)
	}
	var created *redis.Cmd
	err := s.acked(ctx, wfKey(w.ID), func(c redis.Cmdable) error {
		return s.bySHA(ctx, func() error {
			if fused { // the script alone
				created = createScript.EvalSha(ctx, c, keys, args...)
				return created.Err()
			}
			pipe := c.Pipeline()
			created = createScript.EvalSha(ctx, pipe, keys, args...)
			if !cluster || s.durability.Replicas == 0 {
				indexed(pipe)
			}
			_, err := pipe.Exec(ctx)
			return err
		})
	})
	if err == nil && !fused && cluster && s.durability.Replicas > 0 {
		err = s.acked(ctx, openKey(), func(c redis.Cmdable) error {
			return c.ZAdd(ctx, openKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID}).Err()
		})
		if err == nil {
			_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { indexed(p); return nil })
		}
	}
	if created != nil && created.Err() == nil {
		if n, _ := created.Int(); n == 0 {
			// found, not created: the caller is told it exists only as
			// far as it is confirmed (an earlier try's record, told "not
			// confirmed", may be on the primary alone)
			_, unconfirmed := Unconfirmed(err)
			return errors.Join(fmt.Errorf("store: create workflow %s: %w", w.ID, ErrExists), unconfirmed)
		}
	}
	if err != nil {
		// not confirmed (ErrNotConfirmed): created on the primary all the same
		return fmt.Errorf("store: create workflow %s: %w", w.ID, err)
	}
	return nil
}
