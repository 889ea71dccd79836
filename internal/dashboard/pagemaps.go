package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

// instancesPerPage is how many of a map's instances the workflow page
// shows at once: a wide map is read a page at a time, never whole.
const instancesPerPage = 50

// mapView is a map step on the workflow page: one row with its counters,
// which expands into one page of its instances.
type mapView struct {
	Workflow   string
	Step       string
	Size       int // instances a page shows
	Counts     record.MapCounts
	Instances  []producer.StepRecord
	Offset     int
	First      int // 1-based index of the first instance shown
	Last       int // 1-based index of the last instance shown
	Prev, Next int // the offsets the previous and next links ask for
	HasPrev    bool
	HasNext    bool
	Open       bool // the page was asked for this map's instances (?map=)
}

// errBadQuery wraps a workflow page query the page cannot answer (400).
var errBadQuery = errors.New("bad query")

// pageMaps reads, for each map step of wf that has expanded, one page of
// its instances: the first, or for the map named by ?map= the one at
// ?offset=. A bad offset or a ?map= naming no map step of wf is an error
// naming it, wrapping errBadQuery. The map rows' counters are brought up
// to date with the pages' so the row and its instances agree.
func (s *Server) pageMaps(ctx context.Context, q url.Values, wf *producer.Workflow) (map[string]*mapView, error) {
	offset, err := pageParam(q.Get("offset"), "offset")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadQuery, err)
	}
	open := q.Get("map")
	views := map[string]*mapView{}
	for i := range wf.Steps {
		st := &wf.Steps[i]
		if st.Map == nil {
			continue
		}
		v := &mapView{Workflow: wf.ID, Step: st.ID, Size: instancesPerPage, Counts: *st.Map, Open: st.ID == open}
		if v.Open {
			v.Offset = offset
		}
		views[st.ID] = v
		if v.Counts.Started == 0 {
			continue
		}
		page, err := s.client.Instances(ctx, wf.ID, st.ID, v.Offset, instancesPerPage)
		if err != nil {
			return nil, fmt.Errorf("map step %s: %w", st.ID, err)
		}
		v.Counts, v.Instances = page.Counts, page.Instances
		st.Map = &v.Counts
		if n := len(v.Instances); n > 0 {
			v.First, v.Last = v.Offset+1, v.Offset+n
		}
		v.HasPrev, v.Prev = v.Offset > 0, max(v.Offset-instancesPerPage, 0)
		v.HasNext, v.Next = v.Offset+instancesPerPage < v.Counts.Started, v.Offset+instancesPerPage
	}
	if _, ok := views[open]; open != "" && !ok {
		return nil, fmt.Errorf("%w: map %q: workflow %s has no map step of that name with instances", errBadQuery, open, wf.ID)
	}
	return views, nil
}
