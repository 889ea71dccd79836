package dashboard_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/testenv"
)

// Every workflow route, of the API and of the pages, refuses an id no
// workflow can have with 400 before reading anything, and no answer
// echoes a long id; an unknown well-formed id is still 404.
func TestEveryWorkflowRouteRefusesABadIDWithoutEchoingIt(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	d := serveDash(t, e, dashboard.Options{})
	huge := "wf_" + strings.Repeat("a", 900<<10)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/v1/workflows/" + huge, 400},
		{"GET", "/api/v1/workflows/" + huge + "/spec", 400},
		{"GET", "/api/v1/workflows/" + huge + "/result", 400},
		{"GET", "/api/v1/workflows/" + huge + "/steps/s/instances", 400},
		{"POST", "/api/v1/workflows/" + huge + "/cancel", 400},
		{"GET", "/api/v1/workflows/wf%7Bx%7D", 400},
		{"GET", "/workflows/" + huge, 400},
		{"GET", "/api/v1/workflows/wf_nosuchworkflow", 404},
	} {
		r := d.do(t, call{Method: c.method, Path: c.path})
		if r.Code != c.want {
			t.Errorf("%s %.60s: %d %.200s, want %d", c.method, c.path, r.Code, r.Body, c.want)
		}
		if len(r.Body) > 600 {
			t.Errorf("%s %.60s: a %d-byte answer: %.300s…", c.method, c.path, len(r.Body), r.Body)
		}
	}
}
