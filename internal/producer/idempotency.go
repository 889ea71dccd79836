package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// ErrIdempotencyConflict is returned by a submit whose idempotency key was
// used, within the retention, with a different spec or input.
var ErrIdempotencyConflict = store.ErrIdempotencyConflict

// ErrBadIdempotencyKey is returned for an idempotency key that is empty,
// too long or holds control characters.
var ErrBadIdempotencyKey = errors.New("bad idempotency key")

// MaxIdempotencyKeyBytes is the longest idempotency key.
const MaxIdempotencyKeyBytes = 255

// WithIdempotencyKey makes a submit idempotent: the first submit with key
// creates the workflow, and every later one within the retention returns
// it (Submission.Existing) instead of creating another, however many run
// at once. The same key with a different spec or input is refused
// (ErrIdempotencyConflict). The workflow's id is derived from the key
// (ClientOptions.NewID is not used). Keys are not secrets: a key names one
// workflow for everyone who submits to the same Redis.
func WithIdempotencyKey(key string) SubmitOption {
	return func(s *SubmitSettings) { s.IdempotencyKey = key }
}

// CheckIdempotencyKey reports whether key may be used: 1 to 255 bytes of
// UTF-8 without control characters.
func CheckIdempotencyKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: it is empty", ErrBadIdempotencyKey)
	case len(key) > MaxIdempotencyKeyBytes:
		return fmt.Errorf("%w: it is %d bytes long (at most %d)", ErrBadIdempotencyKey, len(key), MaxIdempotencyKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: it is not UTF-8", ErrBadIdempotencyKey)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: it holds a control character", ErrBadIdempotencyKey)
		}
	}
	return nil
}

// keyed is a submit with an idempotency key.
type keyed struct {
	key  string
	id   string // the workflow id the key names
	hash string // of the spec and input as submitted
}

// SpecHash is the hash an idempotency key keeps of a submitted spec and
// its input: SHA-256 of the spec as JSON (map keys sorted), before the
// client's defaults are applied (and without its shards' stamp).
func SpecHash(wspec *spec.Spec) (string, error) {
	if wspec.Shards != nil {
		cp := *wspec
		cp.Shards = nil
		wspec = &cp
	}
	data, err := json.Marshal(wspec)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// lookupKey reads an idempotency key. found: the key's workflow exists
// with the same spec and input (a workflow nobody enqueued yet, because
// its submitter stopped between creating and enqueueing it, is enqueued
// now; a task that exists already is left as it is).
func (c *Client) lookupKey(ctx context.Context, key string, wspec *spec.Spec) (k keyed, found bool, err error) {
	if err := CheckIdempotencyKey(key); err != nil {
		return keyed{}, false, err
	}
	k = keyed{key: key, id: store.IdempotentID(key)}
	if k.hash, err = SpecHash(wspec); err != nil {
		return keyed{}, false, err
	}
	cl, err := c.store.LookupIdempotency(ctx, k.id)
	switch {
	case err != nil:
		return keyed{}, false, err
	case cl.Hash == "" || cl.State == "":
		return k, false, nil // free, or claimed by a submit that has not created it (yet): claim and create
	case cl.Hash != k.hash:
		return keyed{}, false, k.conflict(ErrIdempotencyConflict, c.o.Retention)
	case cl.State == record.StatePending:
		if err := c.enqueueStoredRoots(ctx, k.id); err != nil {
			return keyed{}, false, err
		}
	}
	return k, true, nil
}

// conflict turns the store's refusal of a key into a ConflictError.
func (k keyed) conflict(err error, retention time.Duration) error {
	if !errors.Is(err, ErrIdempotencyConflict) {
		return err
	}
	return &ConflictError{Key: k.key, Workflow: k.id, Retention: retention}
}

// ConflictError is a submit refused because its idempotency key names a
// workflow submitted with a different spec or input. It is an
// ErrIdempotencyConflict.
type ConflictError struct {
	Key       string
	Workflow  string
	Retention time.Duration
}

func (e *ConflictError) Error() string {
	shown := e.Key
	if r := []rune(shown); len(r) > 64 {
		shown = string(r[:64]) + "…"
	}
	return fmt.Sprintf("idempotency key %s names workflow %s, submitted with a different spec or input (a key holds for the retention, %s): use another key",
		strconv.Quote(shown), e.Workflow, e.Retention)
}

// Unwrap makes it an ErrIdempotencyConflict.
func (e *ConflictError) Unwrap() error { return ErrIdempotencyConflict }
