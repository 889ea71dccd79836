package chaosllm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func post(t *testing.T, url, key, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const oaBody = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
const anBody = `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`

func TestPhasesAdvanceByCountAndTime(t *testing.T) {
	sc, err := ParseScenario([]byte(`
phases:
  - { name: first, requests: 2, fault: { status: 503 } }
  - { name: second, endpoint: openai, duration: 10s, fault: { status: 429, retry_after: 1500ms } }
  - { name: last }
`))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1000, 0)}
	srv, _ := New(sc, Options{Now: c.now})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	oa, an := hs.URL+"/v1/chat/completions", hs.URL+"/v1/messages"

	for i := 0; i < 2; i++ {
		if code, _, _ := post(t, oa, "k", oaBody); code != 503 {
			t.Fatalf("request %d: %d, want 503", i, code)
		}
	}
	code, h, body := post(t, oa, "k", oaBody)
	if code != 429 || h.Get("Retry-After") != "2" || h.Get("retry-after-ms") != "1500" || !strings.Contains(body, "rate_limit_exceeded") {
		t.Fatalf("second phase: %d %v %s", code, h, body)
	}
	// the anthropic endpoint is not in the second phase's scope
	if code, _, body := post(t, an, "k", anBody); code != 200 || !strings.Contains(body, Reply("hi\n")) {
		t.Fatalf("anthropic during an openai-only phase: %d %s", code, body)
	}
	c.add(10 * time.Second)
	if code, _, _ := post(t, oa, "k", oaBody); code != 200 {
		t.Fatalf("after the second phase's 10s: %d", code)
	}
	st := srv.Snapshot()
	if st.Phases["default"] != "last" || st.Count("openai", "", "status_503") != 2 || st.Count("openai", "", "status_429") != 1 || st.Count("", KeyID("k"), "ok") != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestFaultRateIsDeterministic(t *testing.T) {
	srv, _ := New(Scenario{Phases: []Phase{{Fault: &Fault{Status: 500, Rate: 0.25}}}}, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var failed []int
	for i := 1; i <= 8; i++ {
		if code, _, _ := post(t, hs.URL+"/v1/messages", "k", anBody); code == 500 {
			failed = append(failed, i)
		}
	}
	if len(failed) != 2 || failed[0] != 4 || failed[1] != 8 {
		t.Fatalf("failed requests %v, want [4 8]", failed)
	}
}

func TestKeysAndBadRequests(t *testing.T) {
	srv, _ := New(Scenario{Keys: []string{"good"}}, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if code, _, body := post(t, hs.URL+"/v1/chat/completions", "bad", oaBody); code != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Fatalf("bad key: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", hs.URL+"/v1/messages", strings.NewReader(anBody))
	req.Header.Set("x-api-key", "good")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("x-api-key: %v %v", resp, err)
	}
	if code, _, body := post(t, hs.URL+"/v1/messages", "good", `{"model":"m"}`); code != 400 || !strings.Contains(body, "invalid_request_error") {
		t.Fatalf("missing max_tokens: %d %s", code, body)
	}
	if code, _, _ := post(t, hs.URL+"/v1/chat/completions", "good", `not json`); code != 400 {
		t.Fatalf("garbage body: %d", code)
	}
}

func TestAdminReplacesScenarioAndResets(t *testing.T) {
	srv, _ := New(Scenario{}, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	post(t, hs.URL+"/v1/chat/completions", "k", oaBody)
	req, _ := http.NewRequest("PUT", hs.URL+"/admin/scenario", strings.NewReader("phases:\n  - fault: { status: 502 }\n"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("put scenario: %v %v", resp, err)
	}
	if code, _, _ := post(t, hs.URL+"/v1/chat/completions", "k", oaBody); code != 502 {
		t.Fatalf("after the new scenario: %d", code)
	}
	req, _ = http.NewRequest("PUT", hs.URL+"/admin/scenario", strings.NewReader("phases:\n  - fault: { status: 200 }\n"))
	resp, _ = http.DefaultClient.Do(req)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "phases[0].fault.status") {
		t.Fatalf("invalid scenario accepted: %d %s", resp.StatusCode, b)
	}
	if resp, err := http.Post(hs.URL+"/admin/reset", "", nil); err != nil || resp.StatusCode != 204 {
		t.Fatalf("reset: %v %v", resp, err)
	}
	resp, _ = http.Get(hs.URL + "/stats")
	var st Stats
	json.NewDecoder(resp.Body).Decode(&st)
	if resp.StatusCode != 200 || st.Total != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}

func TestStreamsAreWellFormed(t *testing.T) {
	srv, _ := New(Scenario{}, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	_, h, body := post(t, hs.URL+"/v1/chat/completions", "k", strings.Replace(oaBody, `"model"`, `"stream":true,"model"`, 1))
	if h.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Fatalf("openai stream: %s", body)
	}
	_, _, body = post(t, hs.URL+"/v1/messages", "k", strings.Replace(anBody, `"model"`, `"stream":true,"model"`, 1))
	var events []string
	for _, line := range strings.Split(body, "\n") {
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, e)
		}
	}
	if events[0] != "message_start" || events[len(events)-1] != "message_stop" {
		t.Fatalf("anthropic events: %v", events)
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for in, want := range map[string]string{
		"phases:\n  - { endpoint: gemini }\n":                `phases[0].endpoint: "gemini"`,
		"phases:\n  - { fault: { status: 302 } }\n":          "phases[0].fault.status: 302",
		"phases:\n  - { duration: soon }\n":                  `bad duration "soon"`,
		"phases:\n  - { nme: x }\n":                          "field nme not found",
		"phases:\n  - { fault: { status: 500, rate: 2 } }\n": "phases[0].fault.rate",
		"answers:\n  - { match: \"(\", text: x }\n":          `answers[0].match: "(" is not a regular expression`,
		"answers:\n  - { text: x, items: 3 }\n":              "answers[0]: text and items are two answers",
		"answers:\n  - { match: plan }\n":                    "answers[0]: no answer",
		"answers:\n  - { items: 2, endpoint: gemini }\n":     `answers[0].endpoint: "gemini"`,
	} {
		if _, err := ParseScenario([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
	if sc, err := ParseScenario(nil); err != nil || len(sc.Phases) != 0 {
		t.Errorf("empty scenario: %v", err)
	}
}

func TestTimelinesPerKeyAndEndpoint(t *testing.T) {
	sc, err := ParseScenario([]byte(`
keys: [good, other]
timelines:
  - name: good key limited
    endpoint: openai
    key: good
    phases:
      - { requests: 1, fault: { status: 429, retry_after: 2s } }
      - {}
phases:
  - { fault: { kind: empty } }
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := New(sc, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	oa := hs.URL + "/v1/chat/completions"
	if code, _, _ := post(t, oa, "good", oaBody); code != 429 {
		t.Fatalf("good key, first call: %d", code)
	}
	if code, _, _ := post(t, oa, "good", oaBody); code != 200 {
		t.Fatalf("good key, second call: %d", code)
	}
	if code, _, body := post(t, oa, "other", oaBody); code != 500 || body != "" {
		t.Fatalf("other key (default timeline): %d %q", code, body)
	}
	if code, _, _ := post(t, hs.URL+"/v1/messages", "good", anBody); code != 500 {
		t.Fatalf("good key on anthropic (default timeline): %d", code)
	}
	st := srv.Snapshot()
	if st.Phases["good key limited"] != "" || st.Count("openai", KeyID("good"), "status_429") != 1 || st.Count("", "", "empty_500") != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRandomFaultMixIsSeededAndBounded(t *testing.T) {
	spec := `
seed: 7
phases:
  - faults:
      - { status: 429, rate: 0.3 }
      - { kind: html, rate: 0.2 }
    latency: { min: 1ms, max: 3ms }
`
	counts := func() map[int]int {
		sc, err := ParseScenario([]byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := New(sc, Options{})
		hs := httptest.NewServer(srv)
		defer hs.Close()
		m := map[int]int{}
		for i := 0; i < 200; i++ {
			code, _, _ := post(t, hs.URL+"/v1/messages", "k", anBody)
			m[code]++
		}
		return m
	}
	a, b := counts(), counts()
	if a[429] != b[429] || a[502] != b[502] {
		t.Fatalf("same seed, different draws: %v vs %v", a, b)
	}
	if a[429] < 40 || a[429] > 80 || a[502] < 20 || a[502] > 60 || a[200]+a[429]+a[502] != 200 {
		t.Fatalf("draws %v far from 30%% / 20%%", a)
	}
}

func TestHiddenAuthFailuresAndProbe(t *testing.T) {
	srv, _ := New(Scenario{Keys: []string{"good"}, HideAuthFailures: true}, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if code, _, body := post(t, hs.URL+"/v1/chat/completions", "revoked", oaBody); code != 500 || body != "" {
		t.Fatalf("hidden auth failure: %d %q", code, body)
	}
	for key, want := range map[string]int{"revoked": 401, "good": 200} {
		req, _ := http.NewRequest("GET", hs.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("probe with %s: %v %v, want %d", key, resp, err, want)
		}
		resp.Body.Close()
	}
}

func TestScenarioValidation(t *testing.T) {
	for in, want := range map[string]string{
		"phases:\n  - { fault: { kind: refuse } }\n":                                        "a refuse phase needs a duration",
		"phases:\n  - { fault: { kind: reset, status: 500 } }\n":                            "kind reset takes no status",
		"phases:\n  - { fault: { kind: teleport } }\n":                                      `"teleport" is not status`,
		"phases:\n  - faults: [ { status: 500, rate: 0.7 }, { status: 502, rate: 0.5 } ]\n": "rates add up to 1.2",
		"timelines:\n  - { endpoint: gemini }\n":                                            `timelines[0].endpoint: "gemini"`,
		"phases:\n  - { latency: { min: 2s, max: 1s } }\n":                                  "latency max is under min",
	} {
		if _, err := ParseScenario([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add([]byte("phases:\n  - { requests: 2, fault: { status: 503 } }\n"))
	f.Add([]byte("timelines:\n  - { key: k, phases: [ { faults: [ { kind: html, rate: 0.5 } ] } ] }\n"))
	f.Add([]byte("tool_script:\n  - turn: 1\n    text: hm\n    calls:\n      - { name: f, arguments: { a: [1, x], b: { c: null } } }\n  - { calls: [ { name: g } ] }\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseScenario(data)
		if err != nil {
			return
		}
		if _, err := New(sc, Options{}); err != nil {
			t.Fatalf("a parsed scenario was refused by New: %v", err)
		}
	})
}

// Answers by prompt pattern: the first that matches answers, on its
// endpoint only; other prompts get the default reply.
func TestAnswersByPromptPattern(t *testing.T) {
	sc, err := ParseScenario([]byte(`answers:
  - { match: "(?i)^plan", items: 3, field: cities }
  - { match: "report", endpoint: anthropic, text: "the anthropic report" }
  - { match: "report", text: "the report" }
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ask := func(path, prompt string) string {
		body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":` + strconv.Quote(prompt) + `}]}`
		code, _, out := post(t, hs.URL+path, "k", body)
		if code != 200 {
			t.Fatalf("%s %q: %d %s", path, prompt, code, out)
		}
		return out
	}
	if out := ask("/v1/chat/completions", "Plan a trip"); !strings.Contains(out, `{\"cities\":[\"cities 1\",\"cities 2\",\"cities 3\"]}`) {
		t.Errorf("plan: %s", out)
	}
	if out := ask("/v1/chat/completions", "write the report"); !strings.Contains(out, `"the report"`) {
		t.Errorf("report on openai: %s", out)
	}
	if out := ask("/v1/messages", "write the report"); !strings.Contains(out, `"the anthropic report"`) {
		t.Errorf("report on anthropic: %s", out)
	}
	if out := ask("/v1/chat/completions", "hello"); !strings.Contains(out, "chaosllm answer") {
		t.Errorf("a prompt no answer matches: %s", out)
	}
}
