package dashboard_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/webhook"
)

// GET /api/v1/webhooks lists the deliveries in the webhooks queue by ids,
// states and host: never the URL's path or query, which may hold a token;
// it needs the token like every API answer.
func TestWebhooksAPIListsDeliveries(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	d := serveDash(t, e, dashboard.Options{Token: token})
	if r := d.do(t, call{Path: "/api/v1/webhooks", Bearer: token}); r.Code != 200 || strings.TrimSpace(r.Body) != "[]" {
		t.Fatalf("no webhook yet: %d %s, want an empty list", r.Code, r.Body)
	}
	ev := webhook.Event{Workflow: "wf_hooked", Name: "n", Event: webhook.Failed, State: "failed", At: time.Now(),
		URL: "https://hooks.example.com/in?token=secret-token-in-url"}
	if err := webhook.Enqueue(t.Context(), e.Asynq, ev, defaults.Retention); err != nil {
		t.Fatal(err)
	}
	if r := d.do(t, call{Path: "/api/v1/webhooks"}); r.Code != 401 {
		t.Errorf("without the token: %d", r.Code)
	}
	r := d.do(t, call{Path: "/api/v1/webhooks", Bearer: token})
	var got []webhook.Delivery
	if err := json.Unmarshal([]byte(r.Body), &got); err != nil || r.Code != 200 {
		t.Fatalf("%d %s (%v)", r.Code, r.Body, err)
	}
	if len(got) != 1 || got[0].EventID != "msg_wf_hooked_failed" || got[0].Workflow != "wf_hooked" || got[0].Event != "failed" ||
		got[0].State != "pending" || got[0].Host != "hooks.example.com" || got[0].Attempts != 0 {
		t.Errorf("listed %+v", got)
	}
	if strings.Contains(r.Body, "secret-token-in-url") {
		t.Errorf("the listing shows the URL's query: %s", r.Body)
	}
	// the page lists the same, to a signed-in person only
	if r := d.do(t, call{Path: "/webhooks"}); r.Code == 200 && strings.Contains(r.Body, "msg_wf_hooked_failed") {
		t.Errorf("the webhooks page without signing in shows the deliveries")
	}
	page := d.do(t, call{Path: "/webhooks", Cookie: d.signIn(t, token)})
	if page.Code != 200 || !strings.Contains(page.Body, "msg_wf_hooked_failed") || !strings.Contains(page.Body, "hooks.example.com") ||
		strings.Contains(page.Body, "secret-token-in-url") {
		t.Errorf("webhooks page: %d\n%s", page.Code, page.Body)
	}
}
