package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/agentq/agentq/internal/producer"
)

// apiInstances is GET /api/v1/workflows/{id}/steps/{step}/instances
// ?offset=N&limit=M: one page of a map step's instances (limit 0 or
// absent: 100; over producer.MaxInstancesPage: that many), so a client reads
// a wide map a page at a time instead of all of it with the workflow.
// 404 for an unknown workflow, 400 for a step that is not a map or a bad
// offset or limit.
func (s *Server) apiInstances(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	offset, err := pageParam(q.Get("offset"), "offset")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	limit, err := pageParam(q.Get("limit"), "limit")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	page, err := s.client.Instances(r.Context(), r.PathValue("id"), r.PathValue("step"), offset, min(limit, producer.MaxInstancesPage))
	switch {
	case errors.Is(err, producer.ErrNotAMap):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "not_a_map"})
		return
	case err != nil:
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// pageParam reads a paging parameter: absent is 0, anything but a
// non-negative integer is an error naming the parameter.
func pageParam(v, name string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative integer", name, v)
	}
	return n, nil
}
