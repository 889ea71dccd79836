package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A workflow tree is a root workflow (one that is not a child) and every
// child workflow under it, at any depth. Its key, in the root record's
// slot, is a hash of every child ever reserved in it (child id → parent
// id): a child is reserved there (ReserveChild) before its record is
// written, by its id, so a spawn delivered again finds its reservation and
// never counts twice, and no crash between the two lets a tree pass its
// bound (a reserved child whose record was never written counts until its
// step runs again and writes it, or the tree expires).

// treeKey is the tree of root: in the root record's slot, so that one
// script reads the root's state with it.
func treeKey(root string) string { return Prefix + "{wf:" + root + "}:tree" }

// ErrTreeFull is ReserveChild's refusal of a child that would take its
// tree past the bound; ErrTreeEnded its refusal of a child of a tree whose
// root ended (canceled, failed, timed out or completed).
var (
	ErrTreeFull  = errors.New("workflow tree full")
	ErrTreeEnded = errors.New("workflow tree ended")
)

// TreeFullError is ErrTreeFull with the tree's count and bound.
type TreeFullError struct {
	Root      string
	Workflows int // in the tree now, the root included
	Max       int
}

func (e *TreeFullError) Error() string {
	return fmt.Sprintf("workflow tree of %s has %d workflows, the most it may have (%d)", e.Root, e.Workflows, e.Max)
}

func (e *TreeFullError) Unwrap() error { return ErrTreeFull }

// reserveChildScript reserves child ARGV[1] (of parent ARGV[2]) in tree
// KEYS[1] of root KEYS[2], which may hold at most ARGV[3] workflows (the
// root included): {1, n} reserved (or reserved already: a spawn delivered
// again), {0, n} full, {-1, n} the root ended (or is gone). The tree lives
// as long as its root's record, and at least ARGV[4] ms from a reservation.
var reserveChildScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[2], 'state')
local n = redis.call('HLEN', KEYS[1]) + 1
if not st or st == 'canceled' or st == 'failed' or st == 'timed_out' or st == 'completed' then
  return {-1, n}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {1, n}
end
if n >= tonumber(ARGV[3]) then
  return {0, n}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[2])
if ttl < tonumber(ARGV[4]) then ttl = tonumber(ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, n + 1}
`)

// ReserveChild reserves child (of parent) in root's tree, which may hold
// max workflows, the root included: before the child's record is written,
// and idempotently (a child reserved already is reserved). It returns the
// tree's count after the call; a *TreeFullError (ErrTreeFull) when the
// child would pass max, ErrTreeEnded when the root has ended or is gone.
func (s *Store) ReserveChild(ctx context.Context, root, parent, child string, max int) (int, error) {
	var res []any
	err := s.acked(ctx, treeKey(root), func(c redis.Cmdable) (err error) {
		res, err = reserveChildScript.Run(ctx, c, []string{treeKey(root), wfKey(root)},
			child, parent, max, s.retention.Milliseconds()).Slice()
		return err
	})
	// not confirmed by the replicas: reserved on the primary all the same;
	// the child's record, written next, is confirmed on its own
	err, _ = Unconfirmed(err)
	if err != nil {
		return 0, fmt.Errorf("store: reserve child %s in the tree of %s: %w", child, root, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("store: reserve child %s in the tree of %s: unexpected reply %v", child, root, res)
	}
	verdict, _ := res[0].(int64)
	n64, _ := res[1].(int64)
	n := int(n64)
	switch verdict {
	case 0:
		return n, &TreeFullError{Root: root, Workflows: n, Max: max}
	case -1:
		return n, fmt.Errorf("store: child %s of %s: %w (its root %s)", child, parent, ErrTreeEnded, root)
	}
	return n, nil
}

// TreeSize is how many workflows root's tree holds (the root included;
// 1 for a workflow that started no child).
func (s *Store) TreeSize(ctx context.Context, root string) (int, error) {
	n, err := s.rdb.HLen(ctx, treeKey(root)).Result()
	if err != nil {
		return 0, fmt.Errorf("store: tree of %s: %w", root, err)
	}
	return int(n) + 1, nil
}

// Tree is a workflow tree's children, each with its parent.
type Tree struct {
	Root   string
	Parent map[string]string // child → parent
}

// TreeOf reads root's tree, a page of its hash at a time.
func (s *Store) TreeOf(ctx context.Context, root string) (*Tree, error) {
	t := &Tree{Root: root, Parent: map[string]string{}}
	iter := s.rdb.HScan(ctx, treeKey(root), 0, "*", 1000).Iterator()
	var child string
	for field := true; iter.Next(ctx); field = !field {
		if field {
			child = iter.Val()
		} else {
			t.Parent[child] = iter.Val()
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("store: tree of %s: %w", root, err)
	}
	return t, nil
}

// Under lists the workflows under wf in the tree (its children, theirs, …),
// parents before their children.
func (t *Tree) Under(wf string) []string {
	kids := map[string][]string{}
	for c, p := range t.Parent {
		kids[p] = append(kids[p], c)
	}
	var out []string
	seen := map[string]bool{wf: true}
	next := []string{wf}
	for len(next) > 0 {
		var level []string
		for _, p := range next {
			for _, c := range kids[p] {
				if !seen[c] {
					seen[c] = true
					level = append(level, c)
				}
			}
		}
		out = append(out, level...)
		next = level
	}
	return out
}

// RootOf is the root of the tree workflow wf is in (wf itself, when it is
// not a child). A child's record names its root; one written before roots
// were recorded is walked up, at most depth levels.
func (s *Store) RootOf(ctx context.Context, wf string, depth int) (string, error) {
	id := wf
	for range depth + 1 {
		l, err := s.ParentOf(ctx, id)
		if err != nil {
			return "", err
		}
		switch {
		case l == nil:
			return id, nil
		case l.Root != "":
			return l.Root, nil
		}
		id = l.Workflow
	}
	return "", fmt.Errorf("store: root of %s: over %s levels of parents", wf, strconv.Itoa(depth))
}
