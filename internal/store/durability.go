package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated durability. Redis replicates asynchronously: a write the
// primary answered can be lost when a replica that had not received it
// yet is promoted. With Durability set, every write that acknowledges
// something (a submit, a settle, a durable call, a signal, a cancel, a
// rerun) is confirmed before the caller is told: the write and then
// WAIT run on one connection to the primary that owns the write's keys
// (WAIT counts the replicas that have everything that connection wrote).
//
// Between the write and WAIT the connection also writes a marker key of
// the same slot (ackKey): a write that found its work done already (a
// redelivered settle, say) writes nothing itself, and WAIT would then
// confirm only what that connection wrote earlier, not the data the
// caller is about to rely on. The marker comes after that data in the
// primary's replication stream, so a replica that has the marker has it.
// And should the primary have changed since that data was written, the
// write runs on the new one, where it either finds its work done (the
// data survived) or does it again.

// Durability is how many replicas must confirm an acknowledging write,
// and how long to wait for them.
type Durability struct {
	Replicas int           // 0: off
	Timeout  time.Duration // WAIT's timeout; rounded up to a millisecond
}

// ErrNotConfirmed is returned for a write that reached the primary but
// was not confirmed by the replicas Durability asks for in time: it may
// not survive a failover. The write itself is not undone.
var ErrNotConfirmed = errors.New("not confirmed by the replicas")

// NotConfirmedError is an ErrNotConfirmed with the figures.
type NotConfirmedError struct {
	Replicas int           // asked for
	Acked    int           // that confirmed in time
	Timeout  time.Duration // waited
}

func (e *NotConfirmedError) Error() string {
	noun := "replicas"
	if e.Replicas == 1 {
		noun = "replica"
	}
	return fmt.Sprintf("written to the primary, not confirmed by %d %s within %s (%d did): it may not survive a failover",
		e.Replicas, noun, e.Timeout, e.Acked)
}

// Unwrap makes it an ErrNotConfirmed.
func (e *NotConfirmedError) Unwrap() error { return ErrNotConfirmed }

// SetDurability sets the confirmation every acknowledging write asks for
// (Replicas 0: none, the default). Call it before the store is used.
func (s *Store) SetDurability(d Durability) {
	if d.Timeout < time.Millisecond {
		d.Timeout = time.Second
	}
	s.durability = d
}

// ackKey is the marker an acknowledging write sets in the slot of key,
// for WAIT to confirm (see above): key's hash tag, or key itself as the
// tag when it has none. It lives a minute.
func ackKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return Prefix + "ack:" + key[i:i+j+2]
		}
	}
	return Prefix + "ack:{" + key + "}"
}

const ackTTL = time.Minute

// acked runs write, whose keys share key's hash slot, and with
// durability on confirms it: on one connection to the primary that owns
// key, the write, the marker and WAIT. Without durability write gets the
// store's client as it is and nothing more is sent.
func (s *Store) acked(ctx context.Context, key string, write func(redis.Cmdable) error) error {
	d := s.durability
	if d.Replicas <= 0 {
		return write(s.rdb)
	}
	conn, err := s.primaryConn(ctx, key)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := write(conn); err != nil {
		s.moved(ctx, err)
		return err
	}
	return s.confirm(ctx, conn, key)
}

// confirm writes key's marker on conn and waits for the replicas.
func (s *Store) confirm(ctx context.Context, conn *redis.Conn, key string) error {
	d := s.durability
	// two round trips: a pipeline would read WAIT's answer with the
	// connection's read timeout, which may be shorter than WAIT's
	err := conn.Set(ctx, ackKey(key), "1", ackTTL).Err()
	var n int64
	if err == nil {
		n, err = conn.Wait(ctx, d.Replicas, d.Timeout).Result()
	}
	if err != nil {
		s.moved(ctx, err)
		return fmt.Errorf("store: confirm a write: %w", err)
	}
	if int(n) < d.Replicas {
		return &NotConfirmedError{Replicas: d.Replicas, Acked: int(n), Timeout: d.Timeout}
	}
	return nil
}

// primaryConn is one connection to the primary that owns key.
func (s *Store) primaryConn(ctx context.Context, key string) (*redis.Conn, error) {
	switch c := s.rdb.(type) {
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("store: the primary of %s: %w", key, err)
		}
		return node.Conn(), nil
	case *redis.Client:
		return c.Conn(), nil
	}
	return nil, fmt.Errorf("store: replicated durability needs a client of one server, a Sentinel-watched primary or a Cluster, not %T", s.rdb)
}

// moved reloads a cluster client's slots when a write on a connection of
// its own was sent to a node that no longer owns them (MOVED, ASK): the
// next try goes to the new owner.
func (s *Store) moved(ctx context.Context, err error) {
	c, ok := s.rdb.(*redis.ClusterClient)
	if !ok || err == nil {
		return
	}
	if msg := err.Error(); strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ") {
		c.ReloadState(ctx)
	}
}

// Unconfirmed splits an acknowledging write's error: a write that was
// not confirmed landed on the primary all the same, so its caller goes
// on as if it had succeeded (enqueues what it made ready, reads its
// answer) and reports the ErrNotConfirmed at the end; any other error is
// the write's own.
func Unconfirmed(err error) (writeErr, unconfirmed error) {
	if errors.Is(err, ErrNotConfirmed) {
		return nil, err
	}
	return err, nil
}

// Confirm confirms, with durability on, what was written before it to
// the primary that owns key's slot by any client (asynq's inspector, say):
// a marker written there now follows it in the replication stream. Only a
// failover between that write and this call goes unseen: the marker then
// lands on the new primary. Without durability it does nothing.
func (s *Store) Confirm(ctx context.Context, key string) error {
	return s.acked(ctx, key, func(redis.Cmdable) error { return nil })
}

// QueueKey is a key in the slot of asynq's queue (for Confirm).
func QueueKey(queue string) string { return asynqPendingKey(queue) }

// SignalKey is a key in the slot of signal (name, match)'s keys (for
// Confirm).
func SignalKey(name, match string) string { return sigTag(name, match) + ":k" }
