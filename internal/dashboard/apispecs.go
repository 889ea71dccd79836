package dashboard

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/agentq/agentq/internal/producer"
)

// apiPutSpec is POST /api/v1/specs/{name}: stores the body (a spec, YAML
// or JSON, checked as a submit's) under name: 201 and its new version, or
// 200 and the version that holds the same content already.
func (s *Server) apiPutSpec(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.o.Config.Limits.MaxSpecBytes)+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	wspec, err := s.client.Parse("", body)
	if err != nil {
		specRefused(w, err)
		return
	}
	st, err := s.client.PutSpec(r.Context(), r.PathValue("name"), wspec)
	switch {
	case errors.Is(err, producer.ErrBadSpecName):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_spec_name"})
	case err != nil:
		apiError(w, err)
	case st.Created:
		writeJSON(w, http.StatusCreated, st)
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// apiSpecs is GET /api/v1/specs: the stored specs and their latest
// versions.
func (s *Server) apiSpecs(w http.ResponseWriter, r *http.Request) {
	sts, err := s.client.StoredSpecs(r.Context())
	if err != nil {
		apiError(w, err)
		return
	}
	if sts == nil {
		sts = []producer.StoredSpec{}
	}
	writeJSON(w, http.StatusOK, sts)
}

// apiSpec is GET /api/v1/specs/{name}?version=N: a stored spec's version
// N (1 or more; without version: the latest). A version that is not a
// whole number of 1 or more is a 400.
func (s *Server) apiSpec(w http.ResponseWriter, r *http.Request) {
	v := 0 // the latest
	if q := r.URL.Query(); q.Has("version") {
		n, err := strconv.Atoi(q.Get("version"))
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "version: " + strconv.Quote(q.Get("version")) +
				" is not a version (versions start at 1; leave version out for the latest)", "code": "bad_version"})
			return
		}
		v = n
	}
	wspec, version, err := s.client.StoredSpecOf(r.Context(), r.PathValue("name"), v)
	switch {
	case errors.Is(err, producer.ErrNoSpec):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error(), "code": "no_spec"})
	case errors.Is(err, producer.ErrBadSpecName):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_spec_name"})
	case err != nil:
		apiError(w, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"name": r.PathValue("name"), "version": version, "spec": wspec})
	}
}
