package store

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Idempotency keys. A submit that names a key gets the workflow id
// IdempotentID(key), so the key's record, idemKey(id), shares the
// workflow's hash tag (one slot, Redis Cluster safe), and "exactly one
// workflow per key" is the create script's own guarantee: it writes a
// record only if the id is free. The key's record holds the hash of the
// spec and input it was first submitted with; a later submit with the
// same key and another hash is refused.
//
// A submit reads the record first (LookupIdempotency): the same hash and
// an existing workflow is the answer. Otherwise it claims the key
// (ClaimIdempotency: the first hash stays), then creates the workflow;
// concurrent submits with one key all claim the same hash, and all but
// one find the id taken. The record lives a minute longer than the
// workflow's (the retention), so a key never points at a workflow that
// is already gone while a new one could take its id with another spec.

// ErrIdempotencyConflict is returned for a submit whose idempotency key
// was used, within the retention, for a different spec or input.
var ErrIdempotencyConflict = errors.New("idempotency key already used with a different spec or input")

// idemKey is the idempotency record of the workflow a key names.
func idemKey(id string) string { return Prefix + "{wf:" + id + "}:idem" }

// idemMargin is how much longer than the workflow's record a key's
// record lives.
const idemMargin = time.Minute

// IdempotentID is the workflow id an idempotency key names: "wf_" and 20
// base32 characters of the key's SHA-256 (the shape of a random id).
func IdempotentID(key string) string {
	sum := sha256.Sum256([]byte("agentq idempotency key\x00" + key))
	return "wf_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:12]))
}

// Claim is what an idempotency key holds.
type Claim struct {
	// Hash is the spec and input hash the key was claimed with; empty if
	// the key holds nothing.
	Hash string
	// State is the state of the key's workflow; empty if its record does
	// not exist (never created, or expired).
	State string
}

// LookupIdempotency reads the claim of the key whose workflow id is id
// (IdempotentID) and its workflow's state, in one round trip; it writes
// nothing.
func (s *Store) LookupIdempotency(ctx context.Context, id string) (Claim, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGet(ctx, idemKey(id), "hash")
	st := pipe.HGet(ctx, wfKey(id), "state")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Claim{}, fmt.Errorf("store: idempotency key of %s: %w", id, err)
	}
	return Claim{Hash: h.Val(), State: st.Val()}, nil
}

// claimScript records a hash for a key unless it holds one; a workflow
// of the key's that exists already (a generated key's) is told that its
// key keeps a record now (its "nokey" field goes: NewWorkflow.KeyRecord).
// KEYS: the key's record, the workflow. ARGV: workflow id, hash, ttl (s).
// Returns the hash the key holds after the call.
var claimScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], 'hash')
if cur then return cur end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'hash', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('HDEL', KEYS[2], 'nokey')
return ARGV[2]
`)

// ClaimIdempotency records hash for the key whose workflow id is id,
// unless the key already holds a hash; it returns ErrIdempotencyConflict
// if that hash is another.
func (s *Store) ClaimIdempotency(ctx context.Context, id, hash string) error {
	ttl := int64((s.maxOpenAge + s.retention + idemMargin) / time.Second) // an open workflow's key; its end shortens it
	cur, err := claimScript.Run(ctx, s.rdb, []string{idemKey(id), wfKey(id)}, id, hash, ttl).Text()
	if err != nil {
		return fmt.Errorf("store: claim idempotency key of %s: %w", id, err)
	}
	if cur != hash {
		return fmt.Errorf("workflow %s: %w", id, ErrIdempotencyConflict)
	}
	return nil
}

// releaseScript drops a claim that still holds a hash, if its workflow
// was never created. KEYS: the key's record, the workflow. ARGV: hash.
var releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'hash') == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 0 then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// ReleaseIdempotency drops the claim on id's key if it holds hash and the
// workflow was not created: a submit that failed after its claim does not
// keep the key from another spec.
func (s *Store) ReleaseIdempotency(ctx context.Context, id, hash string) error {
	if err := releaseScript.Run(ctx, s.rdb, []string{idemKey(id), wfKey(id)}, hash).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("store: release idempotency key of %s: %w", id, err)
	}
	return nil
}
