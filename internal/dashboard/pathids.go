package dashboard

import (
	"net/http"
	"strings"
)

// checkPathID refuses, before any route runs, a request whose path names
// a workflow by an id no workflow can have (checkWorkflowID): 400, with
// the id quoted bounded, on every workflow route of the API and the
// pages alike, so that no 404 echoes a long id and nothing is read from
// Redis for it. It reports whether the request may go on.
func checkPathID(w http.ResponseWriter, r *http.Request) bool {
	for _, prefix := range []string{"/api/v1/workflows/", "/workflows/"} {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, "/")
		err := checkWorkflowID(id)
		if err == nil {
			return true
		}
		if prefix == "/api/v1/workflows/" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_id"})
		} else {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		return false
	}
	return true
}
