package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// POST /api/v1/signals completes the step waiting on the signal: 200 and
// what it did; a second send of an Idempotency-Key is a duplicate; no
// token is 401; a bad signal is 400 bad_signal; the workflow page says
// what the step waits for. The HTTP client (enqueue --server) sends the
// key as the header and gets the same answers.
func TestAPISendsASignal(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"after": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "after", nil }}})
	d := serveDash(t, e, dashboard.Options{Token: token})
	wspec := e.Spec(`name: paid
input: { order: "42" }
steps:
  - { id: paid, wait_for: { signal: payment.succeeded, match: "{{ .Input.order }}" } }
  - { id: after, run: after, depends_on: [paid] }
`)
	id := e.Submit(t, wspec)
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	page := d.do(t, call{Path: "/workflows/" + id, Bearer: token})
	if !strings.Contains(page.Body, "waits for a signal") || !strings.Contains(page.Body, "waits for signal payment.succeeded matching &#34;42&#34;") {
		t.Fatalf("the workflow page does not say what the step waits for:\n%s", page.Body)
	}
	post := func(body, bearer, key string) (int, string) {
		c := call{Method: "POST", Path: "/api/v1/signals", JSON: body, Bearer: bearer}
		if key != "" {
			c.Header = map[string]string{"Idempotency-Key": key}
		}
		r := d.do(t, c)
		return r.Code, r.Body
	}
	sig := `{"name": "payment.succeeded", "match": "42", "data": {"amount": 7}}`
	if code, _ := post(sig, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	for _, bad := range []string{`payment`, `{"name": "pay ment"}`, `{"name": "p", "data": {"a":`, `{"name": "p", "extra": 1}`} {
		if code, body := post(bad, token, ""); code != http.StatusBadRequest || !strings.Contains(body, "bad_signal") {
			t.Errorf("%s: %d %s, want 400 bad_signal", bad, code, body)
		}
	}
	if code, body := post(sig, token, strings.Repeat("k", 300)); code != http.StatusBadRequest || !strings.Contains(body, "bad_idempotency_key") {
		t.Errorf("a bad key: %d %s", code, body)
	}
	code, body := post(sig, token, "evt-1")
	var res producer.SignalResult
	if err := json.Unmarshal([]byte(body), &res); code != http.StatusOK || err != nil || len(res.Delivered) != 1 || res.Delivered[0].Workflow != id {
		t.Fatalf("send: %d %s (%v)", code, body, err)
	}
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if wf.Steps[0].Output != `{"amount":7}` {
		t.Fatalf("the step's output %q", wf.Steps[0].Output)
	}

	// over HTTP, the client's key goes as the header: a duplicate
	remote := apiclient.New(d.URL, token)
	dup, err := remote.Signal(t.Context(), producer.Signal{Name: "payment.succeeded", Match: "42", Data: json.RawMessage(`{"amount": 7}`), IdempotencyKey: "evt-1"})
	if err != nil || !dup.Duplicate || dup.ID != res.ID {
		t.Fatalf("a second send of the key over HTTP: %+v %v, want a duplicate of %s", dup, err, res.ID)
	}
	kept, err := remote.Signal(t.Context(), producer.Signal{Name: "payment.succeeded", Match: "42"})
	if err != nil || !kept.Kept || kept.KeptUntil == nil {
		t.Fatalf("a send with nothing waiting over HTTP: %+v %v", kept, err)
	}
	if _, err := remote.Signal(t.Context(), producer.Signal{Name: "pay ment"}); !errors.Is(err, producer.ErrBadSignal) {
		t.Fatalf("a bad signal over HTTP: %v, want ErrBadSignal", err)
	}
}
