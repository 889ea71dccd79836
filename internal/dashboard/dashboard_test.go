package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

const token = "dashboard-token-for-tests"

// blocked starts a worker whose first LLM call gets a 400, submits a
// one-step workflow and waits until it is blocked on its dead step.
func blocked(t *testing.T) (*testenv.Env, *httptest.Server, string) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{Steps: mapFuncs(), Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 400, Message: "unsupported parameter"}}, {}}}})
	id := e.Submit(t, e.Spec("name: page\nsteps:\n  - { id: s, route: solo, prompt: \"hello dashboard\" }\n"))
	e.Wait(t, id, 10*time.Second, store.StateBlocked)
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: token,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	// wait until asynq has archived the step
	poll.Until(t, 5*time.Second, func() (bool, string) {
		info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", tasks.TaskID(id, "s"))
		return err == nil && info.State == asynq.TaskStateArchived, "step not archived"
	})
	return e, hs, id
}

func do(t *testing.T, method, url, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAPIAuthAndNoKeysAnywhere(t *testing.T) {
	e, hs, id := blocked(t)
	task := tasks.TaskID(id, "s")
	for _, bearer := range []string{"", "wrong-token"} {
		if code, _ := do(t, "POST", hs.URL+"/api/v1/dlq/"+task+"/requeue", bearer); code != http.StatusUnauthorized {
			t.Fatalf("requeue with token %q: %d, want 401", bearer, code)
		}
	}
	if code, body := do(t, "GET", hs.URL+"/api/v1/workflows/"+id, ""); code != http.StatusUnauthorized || strings.Contains(body, "blocked") {
		t.Fatalf("status without the token: %d %s", code, body)
	}
	if code, body := do(t, "GET", hs.URL+"/api/v1/workflows/"+id, token); code != 200 || !strings.Contains(body, `"state":"blocked"`) {
		t.Fatalf("status: %d %s", code, body)
	}
	if code, body := do(t, "POST", hs.URL+"/api/v1/dlq/"+task+"/requeue", token); code != 200 {
		t.Fatalf("requeue with the token: %d %s", code, body)
	}
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
	// every page and API answer, and /metrics: no API key anywhere
	for _, path := range []string{"/workflows", "/workflows/" + id, "/providers", "/dlq", "/api/v1/workflows", "/api/v1/workflows/" + id,
		"/api/v1/workflows/" + id + "/result", "/api/v1/dlq", "/metrics", "/asynq/"} {
		code, body := do(t, "GET", hs.URL+path, token)
		if code != 200 {
			t.Errorf("GET %s: %d", path, code)
		}
		for _, k := range testenv.Keys {
			if strings.Contains(body, k) {
				t.Errorf("GET %s shows an API key", path)
			}
		}
	}
	if _, body := do(t, "GET", hs.URL+"/providers", token); !strings.Contains(body, "oa#1 (…") || !strings.Contains(body, "m-oa") {
		t.Errorf("providers page lacks keys by fingerprint or targets:\n%s", body)
	}
	// read-only refuses even with the token
	ro, _ := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: token, ReadOnly: true,
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	defer ro.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/api/v1/workflows/"+id+"/cancel", nil)
	req.Host = "localhost"
	req.Header.Set("Authorization", "Bearer "+token)
	ro.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("read-only cancel: %d", rec.Code)
	}
}

// A person opens the blocked workflow, finds its dead step, signs in with
// the token and requeues it from the page; the workflow completes.
func TestBrowserRequeuesADeadStep(t *testing.T) {
	ctx := newBrowser(t, 120*time.Second)
	e, hs, id := blocked(t)

	task := tasks.TaskID(id, "s")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		must(err)
		return v
	}
	// with a token every page needs it: the workflow's page asks to sign in
	must(chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/workflows/"+id), chromedp.WaitVisible(`input[name="token"]`)))
	if page := text("main"); strings.Contains(page, "blocked") || strings.Contains(page, "hello dashboard") || !strings.Contains(page, "sign in") {
		t.Fatalf("workflow page before sign-in:\n%s", page)
	}
	// a forged post without the session is refused, and so is a read
	for _, f := range []string{`fetch("/dlq/` + task + `/requeue", {method: "POST"})`, `fetch("/api/v1/dlq/` + task + `")`} {
		refused, err := chromedp.Run(ctx, chromedp.Evaluate[int](f+`.then(r => r.status)`, chromedp.EvalAwaitPromise))
		must(err)
		if refused != http.StatusUnauthorized {
			t.Fatalf("%s without signing in: %d, want 401", f, refused)
		}
	}
	must(chromedp.Do(ctx,
		chromedp.SendKeys(`input[name="token"]`, token),
		chromedp.Click("#login"),
		chromedp.WaitVisible("#state"),
	))
	if st := text("#state"); st != "blocked" {
		t.Fatalf("workflow page says %q, want blocked", st)
	}
	must(chromedp.Do(ctx, chromedp.Click(`a[href="/dlq/`+task+`"]`), chromedp.WaitVisible("#requeue")))
	if page := text("main"); !strings.Contains(page, "hello dashboard") || !strings.Contains(page, "unsupported parameter") {
		t.Fatalf("dead letter page after sign-in:\n%s", page)
	}
	must(chromedp.Do(ctx,
		chromedp.Click("#requeue"),
		chromedp.WaitVisible("#state"),
	))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
	must(chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible("#state")))
	if st := text("#state"); st != "completed" {
		t.Fatalf("after requeue the page says %q", st)
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(err)
	out := filepath.Join(t.TempDir(), "dashboard.png")
	if os.Getenv("AGENTQ_UPDATE_SCREENSHOT") != "" {
		out = filepath.Join("..", "..", "docs", "dashboard.png")
	}
	if err := os.WriteFile(out, buf, 0o644); err != nil {
		t.Fatal(err)
	}

	// a 120-instance map is one row; it expands into its first 50
	// instances, and "next 50" shows the next page, expanded
	wide := wideWorkflow(t, e, 120)
	visible := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll(`+strconv.Quote(sel)+`)].filter(e => e.checkVisibility()).length`))
		must(err)
		return n
	}
	must(chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/workflows/"+wide), chromedp.WaitVisible("#step-m")))
	if row := text("#step-m"); !strings.Contains(row, "120/120") || visible("tr.instance") != 0 {
		t.Fatalf("the map's row %q (want 120/120), %d instance rows shown before expanding", row, visible("tr.instance"))
	}
	must(chromedp.Do(ctx, chromedp.Click("#map-m summary"), chromedp.WaitVisible("#map-m tr.instance")))
	if n := visible("#map-m tr.instance"); n != 50 || !strings.Contains(text("#map-m"), "m[49]") {
		t.Fatalf("expanded map shows %d instances, want m[0]…m[49]", n)
	}
	must(chromedp.Do(ctx, chromedp.Click("#map-m a.next"), chromedp.WaitVisible("#map-m a.prev")))
	if n, page := visible("#map-m tr.instance"), text("#map-m"); n != 50 || !strings.Contains(page, "m[50]") || strings.Contains(page, "m[49]\t") {
		t.Fatalf("next 50 shows %d instances:\n%s", n, page)
	}
}

func TestStepGraphColumns(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	id := e.Submit(t, e.Spec(`
name: g
defaults: { route: solo }
steps:
  - { id: a, prompt: "x" }
  - { id: b, depends_on: [a], prompt: "x" }
  - { id: c, depends_on: [a], prompt: "x" }
  - { id: d, depends_on: [b, c], prompt: "x" }
  - { id: lone, prompt: "x" }
`))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
	srv, _ := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	defer srv.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/workflows/"+id, nil)
	req.Host = "localhost"
	srv.ServeHTTP(rec, req)
	body := rec.Body.String()
	cols := strings.Split(body[strings.Index(body, `class="graph"`):strings.Index(body, "</table>")], `class="col"`)[1:]
	got := make([]string, len(cols))
	for i, c := range cols {
		for _, s := range []string{"a", "b", "c", "d", "lone"} {
			if strings.Contains(c, `href="#step-`+s+`"`) {
				got[i] += s
			}
		}
	}
	if strings.Join(got, "|") != "alone|bc|d" {
		t.Fatalf("graph columns %q, want a and lone, then b and c, then d", got)
	}
}
