package store

import (
	"strings"
	"sync"
	"sync/atomic"
)

// field is one of a step's fields in the workflow hash ("<step>.<field>").
type field int

const (
	fPrefix field = iota // "<step>." itself
	fState
	fOwner
	fLeaseUntil
	fAttempts
	fStartedAt
	fItem
	fSettled
	fFailed
	fFinishedAt
	fAbandoned
	fError
	fOutput
	fTarget
	fInputHash
	fPromptTokens
	fCompletionTokens
	fCostMicros
	fToolCalls
	fDegraded
	fClass
	fNin
	fNitems
	fNdone
	fNext
	fNmissing
	fReleased
	nFields
)

var fieldSuffix = [nFields]string{"", "state", "owner", "lease_until", "attempts", "started_at", "item", "settled", "failed",
	"finished_at", "abandoned", "error", "output", "target", "input_hash", "prompt_tokens", "completion_tokens", "cost_micros",
	"tool_calls", "degraded", "class", "nin", "nitems", "ndone", "next", "nmissing", "released"}

// fieldNames are one step's field names, as script arguments: built and
// boxed once per step id rather than at every Begin and Settle, where
// concatenating and boxing them was a quarter of the store's allocations
// per step. A cached set is complete (so never written again); one that
// is not cached (a map instance's, built for one call) fills itself as it
// is asked.
type fieldNames struct {
	step  string
	names [nFields]any
}

func (f *fieldNames) name(i field) any {
	if f.names[i] == nil {
		f.names[i] = f.step + "." + fieldSuffix[i]
	}
	return f.names[i]
}

// fieldCache holds the field names of up to maxCachedSteps step ids
// (instances of map steps, "<map>[<n>]", are not kept: there can be
// 10,000 of one map, each begun and settled about once).
type fieldCache struct {
	m sync.Map // step id → *fieldNames
	n atomic.Int64
}

const maxCachedSteps = 4096

func (c *fieldCache) of(step string) *fieldNames {
	if v, ok := c.m.Load(step); ok {
		return v.(*fieldNames)
	}
	f := &fieldNames{step: step}
	if strings.IndexByte(step, '[') >= 0 || c.n.Load() >= maxCachedSteps {
		return f
	}
	for i := range f.names {
		f.name(field(i))
	}
	if v, loaded := c.m.LoadOrStore(step, f); loaded {
		return v.(*fieldNames)
	}
	c.n.Add(1)
	return f
}
