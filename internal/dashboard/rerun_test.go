package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A finished workflow runs again from a step through the API (409 while
// it runs, 400 for a step it lacks, 200 with the new generation) and from
// its page's "run again from" form; the page shows its deadline (a rerun
// has none) and which run it is.
func TestRerunFromTheAPIAndThePage(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	d := serveDash(t, e, dashboard.Options{}) // no token: loopback, may act
	id, err := e.Client.Submit(t.Context(), e.Spec("name: twice\nsteps:\n  - { id: a, route: solo, prompt: one }\n  - { id: b, route: solo, prompt: two, depends_on: [a] }\n"),
		producer.WithDeadline(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if page := d.do(t, call{Path: "/workflows/" + id}); !strings.Contains(page.Body, " · deadline ") || strings.Contains(page.Body, " · run ") {
		t.Fatalf("the first run's page shows no deadline, or a run number:\n%s", page.Body)
	}
	api := func(body string) (int, string) {
		r := d.do(t, call{Method: "POST", Path: "/api/v1/workflows/" + id + "/rerun", JSON: body})
		return r.Code, r.Body
	}
	if code, body := api(`{"from": "nope"}`); code != http.StatusBadRequest {
		t.Fatalf("an unknown step: %d %s", code, body)
	}
	if code, body := api(`{"from": "b"}`); code != http.StatusOK || !strings.Contains(body, `"generation":1`) {
		t.Fatalf("rerun: %d %s", code, body)
	}
	waitRun(t, e, id, 1)

	page := d.do(t, call{Path: "/workflows/" + id})
	for _, want := range []string{`action="/workflows/` + id + `/rerun"`, "<option>a</option>", " · run 2"} {
		if !strings.Contains(page.Body, want) {
			t.Fatalf("the page lacks %q:\n%s", want, page.Body)
		}
	}
	own := map[string]string{"Origin": d.URL, "Sec-Fetch-Site": "same-origin"}
	if r := d.do(t, call{Method: "POST", Path: "/workflows/" + id + "/rerun", Header: own, Form: url.Values{"from": {"a"}}}); r.Code != http.StatusSeeOther {
		t.Fatalf("rerun from the page: %d %s", r.Code, r.Body)
	}
	waitRun(t, e, id, 2)
}

// waitRun waits for workflow id to complete its run of generation gen.
func waitRun(t *testing.T, e *testenv.Env, id string, gen int) {
	t.Helper()
	poll.Until(t, 20*time.Second, func() (bool, string) {
		w, err := e.Store.Get(t.Context(), id)
		if err != nil {
			return false, err.Error()
		}
		return w.State == store.StateCompleted && w.Generation == gen, "workflow " + w.State
	})
}
