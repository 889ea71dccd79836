package dashboard

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// decisionRequest is the body of POST .../decision.
type decisionRequest struct {
	Approve bool   `json:"approve"`
	Comment string `json:"comment"`
}

// apiDecide is POST /api/v1/workflows/{id}/steps/{step}/decision: a
// person's decision on a waiting approval step. 409 if the step is not
// waiting for one.
func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body is not a decision ({\"approve\": true|false, \"comment\": \"…\"}): " + err.Error()})
		return
	}
	state, err := s.client.Decide(r.Context(), r.PathValue("id"), r.PathValue("step"), req.Approve, req.Comment, "api")
	switch {
	case errors.Is(err, flow.ErrNotWaiting):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error(), "code": "not_waiting"})
	case err != nil:
		apiError(w, err)
	default:
		writeJSON(w, http.StatusOK, map[string]string{"state": state})
	}
}

// decisionForm is the workflow page's approve and reject buttons.
func (s *Server) decisionForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	approve := r.FormValue("decision") == "approve"
	if !approve && r.FormValue("decision") != "reject" {
		http.Error(w, "decision must be approve or reject", http.StatusBadRequest)
		return
	}
	_, err := s.client.Decide(r.Context(), id, r.PathValue("step"), approve, r.FormValue("comment"), "dashboard")
	switch {
	case errors.Is(err, flow.ErrNotWaiting):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/workflows/"+url.PathEscape(id), http.StatusSeeOther)
}

// apiRerun is POST /api/v1/workflows/{id}/rerun with {"from": STEP}: 409
// not_finished for a workflow still running, 400 for an unknown step.
func (s *Server) apiRerun(w http.ResponseWriter, r *http.Request) {
	var req struct {
		From string `json:"from"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.From == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body names no step to run again from ({\"from\": \"STEP\"})"})
		return
	}
	gen, err := s.client.Rerun(r.Context(), r.PathValue("id"), req.From)
	switch {
	case errors.Is(err, producer.ErrNotFinished):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error(), "code": "not_finished"})
	case errors.Is(err, spec.ErrInvalidSpec):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case err != nil:
		apiError(w, err)
	default:
		writeJSON(w, http.StatusOK, map[string]int{"generation": gen})
	}
}

// rerunForm is the workflow page's "run again from": the workflow runs
// again from the chosen step (as apiRerun), and the page shows it.
func (s *Server) rerunForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	_, err := s.client.Rerun(r.Context(), id, r.FormValue("from"))
	switch {
	case errors.Is(err, producer.ErrNotFinished):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case errors.Is(err, spec.ErrInvalidSpec):
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/workflows/"+url.PathEscape(id), http.StatusSeeOther)
}
