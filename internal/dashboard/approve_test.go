package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// The API decides an approval step that waits: 200 and the workflow goes
// on; a second decision is 409 not_waiting; no token is 401; a body that
// is not a decision is 400.
func TestAPIDecidesAnApprovalStep(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"after": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "after", nil }}})
	d := serveDash(t, e, dashboard.Options{Token: token})
	id := e.Submit(t, e.Spec(`name: gate
steps:
  - { id: gate, approve: { message: "go?" } }
  - { id: after, run: after, depends_on: [gate] }
`))
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	post := func(body, bearer string) (int, string) {
		r := d.do(t, call{Method: "POST", Path: "/api/v1/workflows/" + id + "/steps/gate/decision", JSON: body, Bearer: bearer})
		return r.Code, r.Body
	}
	if code, _ := post(`{"approve": true}`, ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, body := post(`approve`, token); code != http.StatusBadRequest {
		t.Fatalf("a body that is not a decision: %d %s", code, body)
	}
	if code, body := post(`{"approve": true, "comment": "fine"}`, token); code != http.StatusOK {
		t.Fatalf("decide: %d %s", code, body)
	}
	if code, body := post(`{"approve": false}`, token); code != http.StatusConflict || !strings.Contains(body, "not_waiting") {
		t.Fatalf("a second decision: %d %s", code, body)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if out := wf.Steps[0].Output; !strings.Contains(out, `"approved":true`) || !strings.Contains(out, `"by":"api"`) {
		t.Errorf("decision %s", out)
	}
}

// The workflow page shows a waiting approval step's buttons (to a
// dashboard that may act), and its form decides.
func TestWorkflowPageDecidesAnApprovalStep(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	d := serveDash(t, e, dashboard.Options{}) // no token: loopback, may act
	id := e.Submit(t, e.Spec("name: gate\nsteps:\n  - { id: gate, approve: { message: \"ship <b>it</b>?\" } }\n"))
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	page := d.do(t, call{Path: "/workflows/" + id})
	if !strings.Contains(page.Body, `action="/workflows/`+id+`/steps/gate/decision"`) || !strings.Contains(page.Body, "ship &lt;b&gt;it&lt;/b&gt;?") {
		t.Fatalf("page lacks the decision form or escapes nothing:\n%s", page.Body)
	}
	own := map[string]string{"Origin": d.URL, "Sec-Fetch-Site": "same-origin"}
	r := d.do(t, call{Method: "POST", Path: "/workflows/" + id + "/steps/gate/decision", Header: own, Form: url.Values{"decision": {"reject"}, "comment": {"not yet"}}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("decide from the page: %d %s", r.Code, r.Body)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if out := wf.Steps[0].Output; !strings.Contains(out, `"approved":false`) || !strings.Contains(out, `"comment":"not yet"`) || !strings.Contains(out, `"by":"dashboard"`) {
		t.Errorf("decision %s", out)
	}
	if r := d.do(t, call{Method: "POST", Path: "/workflows/" + id + "/steps/gate/decision", Header: own, Form: url.Values{"decision": {"approve"}}}); r.Code != http.StatusConflict {
		t.Errorf("a second decision: %d %s", r.Code, r.Body)
	}
}
