package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Stored specs: workflow specs kept by name for child workflows and for
// workers that register theirs, each put a new version unless its content
// is the latest's or an earlier version's. One name's versions share a
// hash tag ({spec:<name>}), so a put is one script (Redis Cluster safe);
// the names are indexed in a set of their own. Stored specs do not expire.
//
//	{spec:<name>}:v  hash: latest → the version new workflows run, top → the highest, v:N → the spec (JSON), h:<sha256> → N

func specKey(name string) string { return Prefix + "{spec:" + name + "}:v" }
func specNamesKey() string       { return Prefix + "specs" }

// putSpecScript stores a spec's version unless one holds the same
// content (that version becomes the latest again: a rollback). KEYS: the
// name's versions. ARGV: the content's hash, the spec. Returns {version,
// 1 if it is new}.
var putSpecScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], 'h:' .. ARGV[1])
if v then
  redis.call('HSET', KEYS[1], 'latest', v)
  return {tonumber(v), 0}
end
local n = tonumber(redis.call('HGET', KEYS[1], 'top') or redis.call('HGET', KEYS[1], 'latest') or '0') + 1
redis.call('HSET', KEYS[1], 'v:' .. n, ARGV[2], 'h:' .. ARGV[1], n, 'latest', n, 'top', n)
return {n, 1}
`)

// PutSpec stores spec (JSON) under name: a new version, or the version
// that holds the same content already (created false).
func (s *Store) PutSpec(ctx context.Context, name string, spec []byte) (version int, created bool, err error) {
	sum := sha256.Sum256(spec)
	res, err := putSpecScript.Run(ctx, s.rdb, []string{specKey(name)}, hex.EncodeToString(sum[:]), spec).Int64Slice()
	if err != nil || len(res) != 2 {
		return 0, false, fmt.Errorf("store: put spec %s: %w", name, err)
	}
	if err := s.rdb.SAdd(ctx, specNamesKey(), name).Err(); err != nil {
		return 0, false, fmt.Errorf("store: put spec %s: index: %w", name, err)
	}
	return int(res[0]), res[1] == 1, nil
}

// ErrNoSpec is returned for a stored spec name or version that does not
// exist.
var ErrNoSpec = errors.New("no such stored spec")

// GetSpec reads version version of stored spec name (0: the latest) and
// returns it with its version.
func (s *Store) GetSpec(ctx context.Context, name string, version int) ([]byte, int, error) {
	if version <= 0 {
		v, err := s.rdb.HGet(ctx, specKey(name), "latest").Int()
		if errors.Is(err, redis.Nil) {
			return nil, 0, fmt.Errorf("spec %s: %w", name, ErrNoSpec)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("store: spec %s: %w", name, err)
		}
		version = v
	}
	b, err := s.rdb.HGet(ctx, specKey(name), "v:"+strconv.Itoa(version)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("spec %s version %d: %w", name, version, ErrNoSpec)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: spec %s: %w", name, err)
	}
	return b, version, nil
}

// SpecVersion is a stored spec's name and its latest version.
type SpecVersion struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// SpecNames lists the stored specs, by name, with their latest versions.
func (s *Store) SpecNames(ctx context.Context) ([]SpecVersion, error) {
	names, err := s.rdb.SMembers(ctx, specNamesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("store: spec names: %w", err)
	}
	sort.Strings(names)
	out := make([]SpecVersion, 0, len(names))
	for _, n := range names { // one slot each: one read each
		v, err := s.rdb.HGet(ctx, specKey(n), "latest").Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("store: spec %s: %w", n, err)
		}
		out = append(out, SpecVersion{Name: n, Version: v})
	}
	return out, nil
}
