package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// StoredSpec is a spec stored by name (enqueue spec put, a worker's
// RegisterSpec): its name and version, and whether a put made that
// version (false: the same content was stored already).
type StoredSpec struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Created bool   `json:"created,omitempty"`
	// Missing, for a put, are the stored specs its child workflow steps
	// name that are not stored yet (specs may name each other, so the put
	// is not refused): a submit of it is refused until they are.
	Missing []string `json:"missing,omitempty"`
}

// ErrNoSpec is returned for a stored spec name or version that does not
// exist; ErrBadSpecName for a name that cannot name one.
var (
	ErrNoSpec      = store.ErrNoSpec
	ErrBadSpecName = errors.New("bad spec name")
)

// PutSpec stores wspec (parsed and checked) under name: a new version
// unless the same content is stored already. A workflow started from a
// stored spec keeps the version it started with.
func (c *Client) PutSpec(ctx context.Context, name string, wspec *spec.Spec) (*StoredSpec, error) {
	if !spec.ValidSpecName(name) {
		return nil, fmt.Errorf("%w: %q (a letter, then letters, digits, _, . or -, at most 64)", ErrBadSpecName, flow.BoundID(name))
	}
	b, err := json.Marshal(wspec)
	if err != nil {
		return nil, fmt.Errorf("spec %s: %w", name, err)
	}
	v, created, err := c.store.PutSpec(ctx, name, b)
	if err != nil {
		return nil, err
	}
	missing, err := c.missingChildSpecs(ctx, name, wspec)
	if err != nil {
		return nil, fmt.Errorf("spec %s stored as version %d, but its child specs could not be looked up: %w", name, v, err)
	}
	return &StoredSpec{Name: name, Version: v, Created: created, Missing: missing}, nil
}

// missingChildSpecs are the specs wspec's child workflow steps name that
// are not stored (name, being stored, is), each once, in step order.
func (c *Client) missingChildSpecs(ctx context.Context, name string, wspec *spec.Spec) ([]string, error) {
	var out []string
	for i := range wspec.Steps {
		child := spec.ChildSpecName(&wspec.Steps[i])
		if child == "" || child == name || slices.Contains(out, child) {
			continue
		}
		_, _, err := c.store.GetSpec(ctx, child, 0)
		if errors.Is(err, store.ErrNoSpec) {
			out = append(out, child)
		} else if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StoredSpecs lists the stored specs with their latest versions.
func (c *Client) StoredSpecs(ctx context.Context) ([]StoredSpec, error) {
	vs, err := c.store.SpecNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]StoredSpec, len(vs))
	for i, v := range vs {
		out[i] = StoredSpec{Name: v.Name, Version: v.Version}
	}
	return out, nil
}

// StoredSpecOf reads version version of stored spec name (0: the latest)
// and returns it with its version.
func (c *Client) StoredSpecOf(ctx context.Context, name string, version int) (*spec.Spec, int, error) {
	if !spec.ValidSpecName(name) {
		return nil, 0, fmt.Errorf("%w: %q", ErrBadSpecName, flow.BoundID(name))
	}
	b, v, err := c.store.GetSpec(ctx, name, version)
	if err != nil {
		return nil, 0, err
	}
	var s spec.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, 0, fmt.Errorf("spec %s version %d: stored spec is unreadable: %w", name, v, err)
	}
	return &s, v, nil
}

// checkChildSpecs refuses a spec whose child workflow steps name a spec
// that is not stored: it would only fail when the step starts.
func (c *Client) checkChildSpecs(ctx context.Context, wspec *spec.Spec) error {
	var errs []error
	for i := range wspec.Steps {
		name := spec.ChildSpecName(&wspec.Steps[i])
		if name == "" {
			continue
		}
		_, _, err := c.store.GetSpec(ctx, name, 0)
		if errors.Is(err, store.ErrNoSpec) {
			errs = append(errs, &spec.SpecError{Where: fmt.Sprintf("steps[%d] (%s).workflow.spec", i, wspec.Steps[i].ID),
				Msg: fmt.Sprintf("no stored spec %q (enqueue spec put %s FILE, or a worker's RegisterSpec)", name, name)})
		} else if err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}
