package dashboard

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// submitted is the answer to a submit: the workflow, and whether its
// idempotency key named one that existed already.
// problemDetail is one problem of a refused spec: where in the spec, and
// what.
type problemDetail struct {
	Where   string `json:"where"`
	Message string `json:"message"`
}

type submitted struct {
	*producer.Workflow
	Existing bool `json:"existing"`
}

// apiSubmit is POST /api/v1/workflows: 201 and the new workflow, or 200
// and the existing one an Idempotency-Key names (409 if the key was used
// with another spec or input).
func (s *Server) apiSubmit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.o.Config.Limits.MaxSpecBytes)+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	var opts []producer.SubmitOption
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if err := producer.CheckIdempotencyKey(key); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "Idempotency-Key: " + err.Error(), "code": "bad_idempotency_key"})
			return
		}
		opts = append(opts, producer.WithIdempotencyKey(key))
	}
	wspec, err := s.client.Parse("", body)
	if err != nil {
		specRefused(w, err)
		return
	}
	for _, kv := range r.URL.Query()["input"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "input " + kv + ": want key=value"})
			return
		}
		if wspec.Input == nil {
			wspec.Input = map[string]any{}
		}
		wspec.Input[k] = v
	}
	if d := r.URL.Query().Get("deadline"); d != "" {
		dl, err := time.ParseDuration(d)
		if err != nil || dl < time.Second {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "deadline " + d + ": want a duration of at least 1s"})
			return
		}
		opts = append(opts, producer.WithDeadline(dl))
	}
	switch r.URL.Query().Get("check") {
	case "", "true":
	case "false":
		opts = append(opts, producer.WithoutWorkerCheck())
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "check " + r.URL.Query().Get("check") + ": want true or false"})
		return
	}
	sub, err := s.client.SubmitWorkflow(r.Context(), wspec, opts...)
	switch {
	case errors.Is(err, producer.ErrNoWorkers):
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error(), "code": "no_workers"})
		return
	case errors.Is(err, producer.ErrIdempotencyConflict):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "code": "idempotency_conflict"})
		return
	case errors.Is(err, spec.ErrInvalidSpec):
		specRefused(w, err)
		return
	case err != nil:
		apiError(w, err)
		return
	}
	wf, err := s.client.Status(r.Context(), sub.ID)
	if err != nil {
		apiError(w, err)
		return
	}
	status := http.StatusCreated
	if sub.Existing {
		status = http.StatusOK
	}
	writeJSON(w, status, submitted{Workflow: wf, Existing: sub.Existing})
}

// specRefused answers 400 with a spec's problems, as lines ("request
// body:LINE: where: message") and as where and message, so a client puts
// each back on its own file's line (the body it sent may be that file
// re-encoded, whose lines are not the file's). A problem that names no
// place (YAML that does not parse) keeps its line.
func specRefused(w http.ResponseWriter, err error) {
	var lines []string
	details := []problemDetail{}
	for _, e := range problem.Split(err) {
		var se *spec.SpecError
		if errors.As(e, &se) {
			if se.Where != "" {
				details = append(details, problemDetail{Where: se.Where, Message: se.Msg})
			}
			if se.Source == "" {
				se.Source = "request body"
			}
		}
		lines = append(lines, problem.Lines(e)...)
	}
	if len(details) != len(lines) {
		details = nil // not every problem has a place: the client shows the lines
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid workflow spec", "problems": lines, "details": details})
}
