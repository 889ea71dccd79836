package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// MaxInstancesPage bounds one page of a map's instances.
const MaxInstancesPage = 500

// InstancePage is one page of a map step's instances.
type InstancePage struct {
	Workflow  string              `json:"workflow"`
	Step      string              `json:"step"`
	Counts    record.MapCounts    `json:"counts"`
	Offset    int                 `json:"offset"`
	Instances []record.StepRecord `json:"instances"` // ids "<step>[<n>]", in item order
}

// Instances reads instances [offset, offset+limit) of map step step of
// workflow id (limit at most MaxInstancesPage; 0: 100): status and the
// dashboard page through a wide map instead of loading it whole. A map
// that has not expanded yet has no instances.
func (c *Client) Instances(ctx context.Context, id, step string, offset, limit int) (*InstancePage, error) {
	wspec, err := c.spec(ctx, id)
	if err != nil {
		return nil, err
	}
	st, ok := wspec.Step(step)
	if !ok || !st.IsMap() {
		return nil, fmt.Errorf("workflow %s has no map step %q: %w", id, step, ErrNotAMap)
	}
	if limit <= 0 {
		limit = 100
	}
	limit, offset = min(limit, MaxInstancesPage), max(offset, 0)
	page := &InstancePage{Workflow: id, Step: step, Offset: offset, Instances: []record.StepRecord{}}
	counts, err := c.store.Counts(ctx, id, step)
	if err != nil {
		return nil, err
	}
	if counts != nil {
		page.Counts = *counts
	}
	if n := min(limit, page.Counts.Started-offset); n > 0 {
		if page.Instances, err = c.store.Instances(ctx, id, step, offset, n); err != nil {
			return nil, err
		}
	}
	for i := range page.Instances {
		switch s := &page.Instances[i]; {
		case s.State == store.StepDone && !s.Degraded && spec.WantsJSON(st):
			s.JSON, _ = spec.ParseJSONAnswer(s.Output)
		case s.State == store.StepThrottled:
			s.WaitsFor = record.WaitsForKey // as a throttled step's (parseOutputs)
		}
	}
	return page, nil
}

// ErrNotAMap is returned by Instances for a step that is not a map step.
var ErrNotAMap = errors.New("not a map step")
