package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
)

// states are the workflows page's filter choices.
var states = append([]string{""}, record.States...) // "": any

func (s *Server) workflowsPage(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	wfs, err := s.client.List(r.Context(), state, 100)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.page(w, r, "workflows", "Workflows", map[string]any{"Workflows": wfs, "State": state, "States": states})
}

func (s *Server) workflowPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wf, err := s.client.Status(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	// before the graph copies the steps: pageMaps refreshes the maps' counters
	maps, err := s.pageMaps(r.Context(), r.URL.Query(), wf)
	switch {
	case errors.Is(err, errBadQuery):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	deps := map[string]string{}
	var levels [][]producer.StepRecord
	if wspec, err := s.client.Spec(r.Context(), id); err == nil {
		for _, st := range wspec.Steps {
			deps[st.ID] = strings.Join(st.DependsOn, ", ")
		}
		levels = graphLevels(wspec, wf)
	}
	ended := record.Terminal(wf.State)
	cost := ""
	if c, ok := s.client.Cost(wf); ok && (s.client.Priced() || c > 0) {
		cost = fmt.Sprintf("%.4f", c) + client.CostByProvider(wf)
	}
	ids := make([]string, len(wf.Steps))
	for i, st := range wf.Steps {
		ids[i] = st.ID
	}
	stepIDs, _ := json.Marshal(ids)
	s.page(w, r, "workflow", "Workflow "+wf.ID, map[string]any{"Workflow": wf, "Deps": deps, "Ended": ended, "Cost": cost, "Levels": levels, "Maps": maps,
		"Rerunnable": ended || wf.State == record.StateBlocked, "StepIDs": string(stepIDs)})
}

func (s *Server) cancelForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.client.Cancel(r.Context(), id); err != nil {
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/workflows/"+url.PathEscape(id), http.StatusSeeOther)
}

func (s *Server) dlqPage(w http.ResponseWriter, r *http.Request) {
	dls, err := s.client.DeadLetters(r.Context(), r.URL.Query().Get("class"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.page(w, r, "dlq", "Dead letters", map[string]any{"DeadLetters": dls})
}

func (s *Server) deadLetterPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.client.DeadLetterDetail(r.Context(), r.PathValue("task"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.page(w, r, "deadletter", "Dead letter "+d.TaskID, map[string]any{"Detail": d})
}

func (s *Server) dlqForm(w http.ResponseWriter, r *http.Request) {
	task := r.PathValue("task")
	var err error
	switch r.PathValue("action") {
	case "requeue":
		err = s.client.Requeue(r.Context(), task)
	case "discard":
		err = s.client.Discard(r.Context(), task)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	wf, _, _ := strings.Cut(task, ":")
	http.Redirect(w, r, "/workflows/"+url.PathEscape(wf)+"?flash="+url.QueryEscape(r.PathValue("action")+"d "+task), http.StatusSeeOther)
}

func (s *Server) providersPage(w http.ResponseWriter, r *http.Request) {
	targets, err := s.client.Targets(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	// keys as the live workers advertise them (and the configuration's, if
	// it holds any): the dashboard needs no API key to show them
	fleetKeys, err := s.client.Keys(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	type keyView struct{ Fingerprint, State string }
	var keys []keyView
	for _, k := range fleetKeys {
		state := k.State
		switch {
		case k.State == record.KeyDisabled:
			state = "disabled: " + k.Disabled
		case k.CoolUntil != nil:
			state = "cooling until " + k.CoolUntil.UTC().Format(time.RFC3339)
		}
		keys = append(keys, keyView{k.Fingerprint, state})
	}
	mcpServers, err := s.client.MCPServers(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	classes := map[string]int{}
	if dls, err := s.client.DeadLetters(r.Context(), ""); err == nil {
		for _, d := range dls {
			classes[d.Class]++
		}
	}
	s.page(w, r, "providers", "Providers", map[string]any{"Targets": targets, "Keys": keys, "MCPServers": mcpServers, "Classes": classes})
}

// graphLevels lays a workflow's steps out for the step graph: each column
// holds the steps whose longest chain of dependencies has that length, so
// every arrow points right.
func graphLevels(wspec *spec.Spec, wf *producer.Workflow) [][]producer.StepRecord {
	depth := map[string]int{}
	var depthOf func(id string, seen int) int
	depthOf = func(id string, seen int) int {
		if d, ok := depth[id]; ok {
			return d
		}
		d := 0
		if st, ok := wspec.Step(id); ok && seen <= len(wspec.Steps) {
			for _, p := range st.DependsOn {
				d = max(d, depthOf(p, seen+1)+1)
			}
		}
		depth[id] = d
		return d
	}
	var levels [][]producer.StepRecord
	for _, s := range wf.Steps {
		d := depthOf(s.ID, 0)
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], s)
	}
	return levels
}
