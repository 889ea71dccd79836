package tasks

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/store"
)

// Submitter writes workflows and enqueues their first steps.
type Submitter struct {
	store     *store.Store
	client    *asynq.Client
	retention time.Duration
	newID     func() string
}

// NewSubmitter returns a Submitter. newID may be nil (random ids).
func NewSubmitter(st *store.Store, client *asynq.Client, newID func() string) *Submitter {
	if newID == nil {
		newID = NewID
	}
	return &Submitter{store: st, client: client, retention: st.Retention(), newID: newID}
}

// NewID returns a random workflow id: "wf_" and 20 base32 characters.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "wf_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Submit writes the workflow record (before anything is enqueued) and
// enqueues the steps that depend on nothing. spec must come from ParseSpec.
func (s *Submitter) Submit(ctx context.Context, spec *Spec) (string, error) {
	id := s.newID()
	data, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encode spec: %w", err)
	}
	ids := make([]string, len(spec.Steps))
	for i, st := range spec.Steps {
		ids[i] = st.ID
	}
	if err := s.store.Create(ctx, store.NewWorkflow{ID: id, Name: spec.Name, Spec: data, Steps: ids}); err != nil {
		return "", err
	}
	for _, root := range spec.Roots() {
		if err := enqueueStep(ctx, s.client, id, spec, root, s.retention); err != nil {
			return id, err
		}
	}
	return id, nil
}

// enqueueStep enqueues one step; an existing task with its id is success.
func enqueueStep(ctx context.Context, c *asynq.Client, wf string, spec *Spec, step string, retention time.Duration) error {
	st, ok := spec.Step(step)
	if !ok {
		return fmt.Errorf("workflow %s has no step %q", wf, step)
	}
	t, err := newStepTask(wf, spec, st, retention)
	if err != nil {
		return err
	}
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue %s: %w", TaskID(wf, step), err)
	}
	return nil
}
