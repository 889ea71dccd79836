package engine_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/tasks"
)

var hookSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("a signing key for the tasks test"))

// hookReceiver is a webhook receiver on 127.0.0.1 that checks every
// delivery's signature and keeps the bodies.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	errs   []error
}

func newHookReceiver(t *testing.T) *hookReceiver {
	key, err := webhook.ParseSecret(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.bodies = append(r.bodies, string(b))
		if err := webhook.Verify(key, req.Header, b, time.Now(), 5*time.Minute); err != nil {
			r.errs = append(r.errs, err)
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) got() ([]string, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...), append([]error(nil), r.errs...)
}

// withWebhooks starts a worker whose configuration signs webhooks and may
// reach 127.0.0.1.
func withWebhooks(t *testing.T, defaultURL string, events ...string) *testenv.Env {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	e.Config.Webhooks = config.Webhooks{Secret: config.Secret(hookSecret), Allow: []string{"127.0.0.1"}, URL: defaultURL, Events: events}
	// the producer knows webhooks are configured (it refuses notify: otherwise)
	e.Client = producer.NewClient(e.Redis, producer.ClientOptions{Limits: app.ClientOptions(e.Config).Limits, Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(),
		SkipWorkerCheck: true, Webhooks: &flow.Webhooks{}})
	e.StartWorker(t)
	return e
}

// A workflow that completes is notified once, signed; its last step
// delivered again (a redelivered settle) enqueues no second webhook.
func TestCompletedWorkflowIsNotifiedOnce(t *testing.T) {
	rcv := newHookReceiver(t)
	e := withWebhooks(t, "")
	id := e.Submit(t, e.Spec(`
name: hooked
notify: { url: "`+rcv.URL+`/in", events: [completed] }
defaults: { route: main }
steps:
  - { id: a, prompt: "one" }
  - { id: b, depends_on: [a], prompt: "two {{ .Steps.a.Output }}" }
`))
	e.Wait(t, id, 20*time.Second, record.StateCompleted)
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	delivered := func() (bool, string) {
		info, err := insp.GetTaskInfo(webhook.Queue, webhook.TaskID(id, "completed"))
		if err != nil {
			return false, err.Error()
		}
		return info.State == asynq.TaskStateCompleted, "delivery is " + info.State.String() + ": " + info.LastErr
	}
	poll.Until(t, 20*time.Second, delivered)
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "b"})
	if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, payload), asynq.TaskID("again"), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo("default", "again")
		return err == nil && info.State == asynq.TaskStateCompleted, "the redelivered step has not run"
	})
	all, err := insp.ListCompletedTasks(webhook.Queue)
	if err != nil || len(all) != 1 {
		t.Fatalf("%d webhook tasks (%v), want 1", len(all), err)
	}
	bodies, errs := rcv.got()
	if len(bodies) != 1 || len(errs) != 0 {
		t.Fatalf("the receiver got %d deliveries (signature errors: %v), want 1, verified", len(bodies), errs)
	}
	want := `"type":"workflow.completed"`
	if !strings.Contains(bodies[0], want) || !strings.Contains(bodies[0], `"data":{"id":"`+id+`","name":"hooked","state":"completed"}`) {
		t.Errorf("body %s", bodies[0])
	}
}

// The configuration's url notifies a workflow with no notify: of its own,
// for the events it lists: a blocked workflow names its unfinished steps
// and the dead step's class, and nothing more.
func TestBlockedWorkflowNotifiesTheDefaultURL(t *testing.T) {
	rcv := newHookReceiver(t)
	e := withWebhooks(t, rcv.URL+"/default", "blocked")
	id := e.Submit(t, e.Spec(`
name: stuck
steps:
  - { id: fetch, route: flaky, max_retries: 0, prompt: "secret prompt text" }
  - { id: write, route: main, depends_on: [fetch], prompt: "x {{ .Steps.fetch.Output }}" }
`))
	e.Wait(t, id, 20*time.Second, record.StateBlocked)
	var bodies []string
	poll.Until(t, 20*time.Second, func() (bool, string) {
		bodies, _ = rcv.got()
		return len(bodies) == 1, "no delivery yet"
	})
	var b webhook.Body
	if err := json.Unmarshal([]byte(bodies[0]), &b); err != nil {
		t.Fatal(err)
	}
	d := b.Data
	if b.Type != "workflow.blocked" || d.ID != id || d.State != "blocked" || strings.Join(d.Unfinished, ",") != "fetch,write" ||
		!strings.HasPrefix(d.Error, "step fetch dead-lettered: ") || strings.Contains(bodies[0], "secret prompt") {
		t.Errorf("body %s", bodies[0])
	}
}

// A workflow whose last step is an approval ends in the process of the
// person who decides (the CLI, the dashboard): its completed webhook is
// still sent, once, and a worker counts it in agentq_workflows_total, as
// every other ending (neither happened: the decision settled the
// workflow where there are no metrics and no webhook secret).
func TestAWorkflowEndedByADecisionIsNotifiedAndCounted(t *testing.T) {
	rcv := newHookReceiver(t)
	e := testenv.Start(t, testenv.Options{NoWorker: true, Metrics: true})
	e.Config.Webhooks = config.Webhooks{Secret: config.Secret(hookSecret), Allow: []string{"127.0.0.1"}}
	prod := producer.NewClient(e.Redis, producer.ClientOptions{Limits: app.ClientOptions(e.Config).Limits, Retention: e.Config.Retention.D(), Routes: e.Config.RouteNames(),
		SkipWorkerCheck: true, Webhooks: &flow.Webhooks{}})
	e.StartWorker(t)
	wspec, err := prod.Parse("gate.yaml", []byte(`
name: gate
notify: { url: "`+rcv.URL+`/in", events: [completed] }
steps:
  - { id: draft, route: solo, prompt: "draft" }
  - { id: ship, depends_on: [draft], approve: { message: "ship it?" } }
`))
	if err != nil {
		t.Fatal(err)
	}
	id, err := prod.Submit(t.Context(), wspec)
	if err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	if state, err := prod.Decide(t.Context(), id, "ship", true, "go", "cli"); err != nil || state != record.StateCompleted {
		t.Fatalf("decide: %s %v", state, err)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		bodies, errs := rcv.got()
		return len(bodies) == 1 && len(errs) == 0 && strings.Contains(bodies[0], `"type":"workflow.completed"`),
			fmt.Sprintf("deliveries %q, errors %v", bodies, errs)
	})
	poll.Until(t, 20*time.Second, func() (bool, string) {
		m := scrape(t, e.MetricsURL)
		return strings.Contains(m, `agentq_workflows_total{status="completed"} 1`), "the workflow's end is not counted"
	})
}
