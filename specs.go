package agentq

import (
	"context"
	"errors"
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

// ErrBadSpecName is matched (errors.Is) by the error for a name no spec
// can be stored under (PutSpec, StoreSpec, StoredSpec): a name is a
// letter, then letters, digits, _, . or -, at most 64.
var ErrBadSpecName = producer.ErrBadSpecName

// ParseSpec reads and checks a workflow spec (YAML or JSON) against the
// configuration — its routes, its limits, its webhooks — without
// connecting to anything: what a submit would refuse is refused here,
// each problem naming its line (ErrInvalidSpec). name says where the spec
// came from in errors; schemaDir is the directory output.schema paths are
// relative to ("": the working directory), e.g. the spec file's.
func (c Config) ParseSpec(name string, data []byte, schemaDir string) (*Spec, error) {
	if c.c == nil {
		return nil, errors.New("agentq: Config.ParseSpec: the Config is empty (use LoadConfig or ParseConfig)")
	}
	return client.ParseSpec(*c.c, name, data, schemaDir)
}

// PutSpec checks spec (YAML or JSON, as Parse does) and stores it under
// name: a new version, or the version that holds the same content. It
// returns the version. A workflow started from a stored spec keeps the
// version it started with.
func (c *Client) PutSpec(ctx context.Context, name string, specYAML []byte) (int, error) {
	s, err := c.c.Parse(name+".yaml", specYAML)
	if err != nil {
		return 0, wrap(err)
	}
	st, err := c.StoreSpec(ctx, name, s)
	if err != nil {
		return 0, err
	}
	return st.Version, nil
}

// StoreSpec is PutSpec for a spec parsed already (Parse, Config.ParseSpec),
// saying what it stored: the version, whether it Created it, and the
// stored specs its child workflow steps name that are not stored yet
// (Missing: a submit of it is refused until they are).
func (c *Client) StoreSpec(ctx context.Context, name string, s *Spec) (*StoredSpec, error) {
	return wrapped(c.c.PutSpec(ctx, name, s))
}

// StoredSpecs lists the stored specs with their latest versions.
func (c *Client) StoredSpecs(ctx context.Context) ([]StoredSpec, error) {
	return wrapped(c.c.StoredSpecs(ctx))
}

// StoredSpec reads version version of the spec stored under name (0: its
// latest) and returns it with its version: what enqueue spec show prints.
// ErrNoSpec (match it with errors.Is) for a name no spec is stored under,
// or a version it does not have; a version below 0, or a name that cannot
// name a spec, is an error saying so.
func (c *Client) StoredSpec(ctx context.Context, name string, version int) (*Spec, int, error) {
	if version < 0 {
		return nil, 0, fmt.Errorf("agentq: StoredSpec(%q, %d): a version is 1 or more (0: the latest)", name, version)
	}
	s, v, err := c.c.StoredSpecOf(ctx, name, version)
	return s, v, wrap(err)
}

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
