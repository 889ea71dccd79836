package agentq

import (
	"context"
	"fmt"

	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// StoredSpec is a spec stored by name: its name and version (for a put,
// Created says it made that version; false: the content was stored
// already).
type StoredSpec = producer.StoredSpec

// ErrNoSpec: no stored spec has that name (or version).
var ErrNoSpec = producer.ErrNoSpec

// PutSpec checks spec (YAML or JSON, as Parse does) and stores it under
// name: a new version, or the version that holds the same content. It
// returns the version. A workflow started from a stored spec keeps the
// version it started with.
func (c *Client) PutSpec(ctx context.Context, name string, specYAML []byte) (int, error) {
	s, err := c.c.Parse(name+".yaml", specYAML)
	if err != nil {
		return 0, err
	}
	st, err := c.c.PutSpec(ctx, name, s)
	if err != nil {
		return 0, err
	}
	return st.Version, nil
}

// StoredSpecs lists the stored specs with their latest versions.
func (c *Client) StoredSpecs(ctx context.Context) ([]StoredSpec, error) { return c.c.StoredSpecs(ctx) }

// RegisterSpec stores spec (YAML or JSON) under name when the worker
// starts (a new version if its content changed), for workflows started by
// name. A spec that does not parse (against the worker's configuration),
// or a name registered twice, is reported by Run.
func (w *Worker) RegisterSpec(name string, specYAML []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, err := client.ParseSpec(*w.cfg.c, name+".yaml", specYAML, "")
	switch {
	case w.running:
		w.errs = append(w.errs, fmt.Errorf("RegisterSpec(%q): the worker is already running", name))
	case !spec.ValidSpecName(name):
		w.errs = append(w.errs, fmt.Errorf("RegisterSpec(%q): a name is a letter, then letters, digits, _, . or -, at most 64", name))
	case err != nil:
		w.errs = append(w.errs, fmt.Errorf("RegisterSpec(%q): %w", name, err))
	case w.specs[name] != nil:
		w.errs = append(w.errs, fmt.Errorf("RegisterSpec(%q): registered twice", name))
	default:
		if w.specs == nil {
			w.specs = map[string]*spec.Spec{}
		}
		w.specs[name] = s
	}
}
