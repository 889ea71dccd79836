package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/testenv"
)

// The queues page lists each queue with a pause or resume button that
// works (a queue no worker serves and nothing was queued on is 404), and
// the schedules (none here); a read-only dashboard shows no buttons.
func TestQueuesPagePausesAndResumes(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	d := serveDash(t, e, dashboard.Options{}) // no token: loopback, may act
	own := map[string]string{"Origin": d.URL, "Sec-Fetch-Site": "same-origin"}
	page := d.do(t, call{Path: "/queues"})
	if page.Code != 200 || !strings.Contains(page.Body, `<tr id="queue-default"><td>default</td><td class="st running">running</td>`) ||
		!strings.Contains(page.Body, `action="/queues/default/pause"`) || !strings.Contains(page.Body, "no schedule ran in the last week") {
		t.Fatalf("queues page: %d\n%s", page.Code, page.Body)
	}
	if r := d.do(t, call{Method: "POST", Path: "/queues/default/pause", Header: own}); r.Code != http.StatusSeeOther {
		t.Fatalf("pause: %d %s", r.Code, r.Body)
	}
	qs, err := e.Client.Queues(t.Context())
	if err != nil || len(qs) == 0 || qs[0].Name != "default" || !qs[0].Paused {
		t.Fatalf("after pause: %+v %v", qs, err)
	}
	if page = d.do(t, call{Path: "/queues"}); !strings.Contains(page.Body, `<td class="st blocked">paused</td>`) || !strings.Contains(page.Body, `action="/queues/default/resume"`) {
		t.Fatalf("the page after pause:\n%s", page.Body)
	}
	if r := d.do(t, call{Method: "POST", Path: "/queues/default/resume", Header: own}); r.Code != http.StatusSeeOther {
		t.Fatalf("resume: %d %s", r.Code, r.Body)
	}
	if qs, _ = e.Client.Queues(t.Context()); qs[0].Paused {
		t.Fatalf("still paused after resume: %+v", qs)
	}
	if r := d.do(t, call{Method: "POST", Path: "/queues/defualt/pause", Header: own}); r.Code != http.StatusNotFound {
		t.Fatalf("an unknown queue: %d %s", r.Code, r.Body)
	}
	ro := serveDash(t, e, dashboard.Options{ReadOnly: true})
	if page = ro.do(t, call{Path: "/queues"}); page.Code != 200 || strings.Contains(page.Body, `action="/queues/`) {
		t.Fatalf("a read-only dashboard shows buttons: %d", page.Code)
	}
}
