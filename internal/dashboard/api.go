package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

// api registers the JSON API: the same operations as the enqueue command.
//
//	GET  /api/v1/workflows?state=S        list (the newest 100, whole)
//	GET  /api/v1/workflows?state=S&name=N&limit=L&after=ID
//	                                      a page, newest first, without steps
//	POST /api/v1/workflows?input=k=v      submit a spec (YAML or JSON body), checked
//	                                      against what live workers serve (?check=false: not);
//	                                      header Idempotency-Key: at most one workflow per key
//	GET  /api/v1/workflows/{id}           status
//	GET  /api/v1/workflows/{id}/spec      the spec it was submitted with
//	GET  /api/v1/workflows/{id}/result    the final steps' outputs
//	GET  /api/v1/workflows/{id}/events    its event log as Server-Sent Events (apievents.go)
//	POST /api/v1/workflows/{id}/cancel
//	GET  /api/v1/specs                    the stored specs and their latest versions
//	POST /api/v1/specs/{name}             store a spec (YAML or JSON body): a new version unless the same
//	GET  /api/v1/specs/{name}?version=N   a stored spec's version (the latest without)
//	POST /api/v1/signals                  send a signal ({name, match, data}; header
//	                                      Idempotency-Key: a second send of a key is a no-op)
//	GET  /api/v1/dlq?class=C              dead letters
//	POST /api/v1/dlq?class=C              requeue every dead letter (of class C)
//	GET  /api/v1/dlq/{task}               one dead letter, its prompt and errors
//	POST /api/v1/dlq/{task}/requeue|discard
//	GET  /api/v1/queues                   the queues, paused or not, and their sizes
//	POST /api/v1/queues/{name}/pause|resume
//	GET  /api/v1/schedules                the periodic workflows workers run
//	GET  /api/v1/keys                     the keys live workers advertise, and their state
//	POST /api/v1/keys/enable?key=P#N      re-enable a key (?all=true: every key)
func (s *Server) api(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/workflows", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var (
			wfs []*producer.Workflow
			err error
		)
		if q.Has("name") || q.Has("limit") || q.Has("after") {
			// a page, filtered, without the steps
			limit, cerr := strconv.Atoi(q.Get("limit"))
			if q.Get("limit") != "" && (cerr != nil || limit < 1) {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit: " + strconv.Quote(q.Get("limit")) + " is not a positive number"})
				return
			}
			wfs, err = s.client.ListPage(r.Context(), producer.ListOptions{State: q.Get("state"), Name: q.Get("name"), Limit: limit, After: q.Get("after")})
		} else {
			wfs, err = s.client.List(r.Context(), q.Get("state"), 100)
		}
		if err != nil {
			apiError(w, err)
			return
		}
		if wfs == nil {
			wfs = []*producer.Workflow{}
		}
		writeJSON(w, http.StatusOK, wfs)
	})
	mux.HandleFunc("POST /api/v1/workflows", s.mutatingWithin(int64(s.o.Config.Limits.MaxSpecBytes)+1, false, s.apiSubmit))
	mux.HandleFunc("GET /api/v1/workflows/{id}", func(w http.ResponseWriter, r *http.Request) {
		wf, err := s.client.Status(r.Context(), r.PathValue("id"))
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, s.withCost(wf))
	})
	mux.HandleFunc("GET /api/v1/workflows/{id}/spec", func(w http.ResponseWriter, r *http.Request) {
		wspec, err := s.client.Spec(r.Context(), r.PathValue("id"))
		if err != nil {
			apiError(w, err)
			return
		}
		if wspec.Notify != nil { // a hook's path and query are often its credential
			n := *wspec.Notify
			n.URL = hookOrigin(n.URL)
			wspec.Notify = &n
		}
		writeJSON(w, http.StatusOK, wspec)
	})
	mux.HandleFunc("GET /api/v1/workflows/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		res, err := s.client.Result(r.Context(), r.PathValue("id"))
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"workflow": res.Workflow, "final": res.Final})
	})
	mux.HandleFunc("GET /api/v1/workflows/{id}/steps/{step}/instances", s.apiInstances)
	mux.HandleFunc("GET /api/v1/workflows/{id}/events", s.apiEvents)
	mux.HandleFunc("POST /api/v1/workflows/{id}/cancel", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		st, err := s.client.Cancel(r.Context(), r.PathValue("id"))
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id"), "state": st})
	}))
	mux.HandleFunc("GET /api/v1/specs", s.apiSpecs)
	mux.HandleFunc("POST /api/v1/specs/{name}", s.mutatingWithin(int64(s.o.Config.Limits.MaxSpecBytes)+1, false, s.apiPutSpec))
	mux.HandleFunc("GET /api/v1/specs/{name}", s.apiSpec)
	mux.HandleFunc("POST /api/v1/signals", s.mutatingWithin(int64(s.o.Config.Limits.MaxSignalBytes)+64<<10, false, s.apiSignal))
	mux.HandleFunc("GET /api/v1/dlq", func(w http.ResponseWriter, r *http.Request) {
		dls, err := s.client.DeadLetters(r.Context(), r.URL.Query().Get("class"))
		if err != nil {
			apiError(w, err)
			return
		}
		if dls == nil {
			dls = []producer.DeadLetter{}
		}
		writeJSON(w, http.StatusOK, dls)
	})
	mux.HandleFunc("POST /api/v1/dlq", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		n, err := s.client.RequeueAll(r.Context(), r.URL.Query().Get("class"))
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"requeued": n})
	}))
	mux.HandleFunc("GET /api/v1/dlq/{task}", func(w http.ResponseWriter, r *http.Request) {
		d, err := s.client.DeadLetterDetail(r.Context(), r.PathValue("task"))
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("POST /api/v1/dlq/{task}/{action}", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch r.PathValue("action") {
		case "requeue":
			err = s.client.Requeue(r.Context(), r.PathValue("task"))
		case "discard":
			err = s.client.Discard(r.Context(), r.PathValue("task"))
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown action " + r.PathValue("action")})
			return
		}
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"task": r.PathValue("task"), "done": r.PathValue("action")})
	}))
	mux.HandleFunc("GET /api/v1/queues", s.apiQueues)
	mux.HandleFunc("POST /api/v1/queues/{name}/pause", s.mutating(s.apiPauseQueue))
	mux.HandleFunc("POST /api/v1/queues/{name}/resume", s.mutating(s.apiResumeQueue))
	mux.HandleFunc("GET /api/v1/schedules", s.apiSchedules)
	mux.HandleFunc("POST /api/v1/workflows/{id}/steps/{step}/decision", s.mutating(s.apiDecide))
	mux.HandleFunc("POST /api/v1/workflows/{id}/rerun", s.mutating(s.apiRerun))
	mux.HandleFunc("GET /api/v1/keys", func(w http.ResponseWriter, r *http.Request) {
		keys, err := s.client.Keys(r.Context())
		if err != nil {
			apiError(w, err)
			return
		}
		if keys == nil {
			keys = []record.KeyInfo{}
		}
		writeJSON(w, http.StatusOK, keys)
	})
	mux.HandleFunc("POST /api/v1/keys/enable", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		all := q.Get("all") == "true"
		if all == (q.Get("key") != "") {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "give key=PROVIDER#N or all=true"})
			return
		}
		res, err := s.client.EnableKeys(r.Context(), q.Get("key"), all)
		switch {
		case errors.Is(err, record.ErrUnknownKey):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		case err != nil:
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	}))
}

// hookOrigin is a webhook URL's scheme and host only ("https://hooks.example/…").
func hookOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

func apiError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var se *producer.SubmitError
	switch {
	case errors.Is(err, producer.ErrNotConfirmed), flow.Unavailable(err):
		// written or not, the request may be sent again: a submit names
		// the idempotency key that makes that safe
		code := "unavailable"
		if errors.Is(err, producer.ErrNotConfirmed) {
			code = "not_confirmed"
		}
		body := map[string]string{"error": err.Error(), "code": code}
		if errors.As(err, &se) {
			body["idempotency_key"], body["workflow"] = se.Key, se.Workflow
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(flow.RetryAfter.Seconds())))
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	case errorsIsNotFound(err):
		status = http.StatusNotFound
	case errors.Is(err, producer.ErrUnknownClass):
		status = http.StatusBadRequest
	case errors.Is(err, producer.ErrUnknownState):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "unknown_state"})
		return
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
