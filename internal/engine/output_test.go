package engine_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// sqlSpec: a JSON step whose answer must carry a string query, and a
// text step that reads the parsed field.
const sqlSpec = `
name: sql-then-explain
input: { question: "top customers by revenue" }
steps:
  - id: sql
    route: main
    prompt: "Write SQL for: {{ .Input.question }}"
    output:
      format: json
      schema:
        type: object
        required: [query]
        properties:
          query: { type: string, minLength: 1 }
          tables: { type: array, items: { type: string } }
  - id: explain
    route: main
    depends_on: [sql]
    prompt: "Explain this query: {{ .Steps.sql.JSON.query }}"
`

// onOpenAI scripts every JSON answer on the OpenAI endpoint (route main's
// first target, oa/m-oa) with fault kind, and on Anthropic (an/m-an) with
// anthropic when it is not empty.
func structuredScenario(openai, anthropic string) chaosllm.Scenario {
	sc := chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Kind: openai}}}}}}
	if anthropic != "" {
		sc.Timelines = append(sc.Timelines, chaosllm.Timeline{Endpoint: "anthropic",
			Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Kind: anthropic}}}})
	}
	return sc
}

func TestInvalidJSONIsRepairedOnceThenTheNextTargetAnswers(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Metrics: true, Scenario: structuredScenario(chaosllm.KindBadJSON, "")})
	id := e.Submit(t, e.Spec(sqlSpec))
	e.Wait(t, id, 15*time.Second, store.StateCompleted)

	st := e.Chaos.Snapshot()
	// the first answer breaks the schema, the repair does too: exactly one
	// repair call, then the next target
	if n := st.Count("openai", "", chaosllm.KindBadJSON); n != 2 {
		t.Fatalf("openai bad_json calls = %d, want 2 (the answer and one repair); %+v", n, st.Calls)
	}
	// sql answered by anthropic; explain is plain text, which oa answers
	if a, o := st.Count("anthropic", "", "ok"), st.Count("openai", "", "ok"); a != 1 || o != 1 {
		t.Fatalf("anthropic ok %d (want 1), openai ok %d (want 1 for explain); %+v", a, o, st.Calls)
	}
	if n := e.Calls.Count("oa/m-oa", retry.InvalidOutput); n != 2 {
		t.Fatalf("observer saw %d invalid_output calls on oa/m-oa, want 2", n)
	}

	res, err := e.Client.Result(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	sql := res.Workflow.Steps[0]
	if sql.Target != "an/m-an" {
		t.Fatalf("sql answered by %s, want an/m-an", sql.Target)
	}
	doc, ok := sql.JSON.(map[string]any)
	if !ok {
		t.Fatalf("sql step has no parsed JSON: %+v", sql)
	}
	query, _ := doc["query"].(string)
	if query == "" {
		t.Fatalf("parsed sql answer has no query: %v", doc)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(sql.Output), &raw); err != nil || raw["query"] != query {
		t.Fatalf("raw output %q does not hold the parsed query %q", sql.Output, query)
	}
	// the downstream prompt received the parsed field: chaosllm's answer
	// is a function of the prompt it got (each message ends in a newline)
	explain := res.Workflow.Steps[1]
	if want := chaosllm.Reply("Explain this query: " + query + "\n"); explain.Output != want {
		t.Fatalf("explain output %q, want the reply to a prompt carrying the query: %q", explain.Output, want)
	}

	body := scrape(t, e.MetricsURL)
	if v := value(t, body, `agentq_llm_requests_total{class="invalid_output",model="m-oa",provider="oa"}`); v != 2 {
		t.Fatalf("invalid_output requests = %v, want 2", v)
	}
	// an invalid answer lowers the target's health but leaves its breaker closed
	brs, err := store.NewBreakers(e.Redis).Load(t.Context(), []string{"oa"})
	if err != nil {
		t.Fatal(err)
	}
	if b := brs["oa"]["m-oa"]; b.State != breaker.Closed || b.Consecutive != 0 {
		t.Fatalf("oa/m-oa breaker %+v after invalid answers, want closed with no failure streak", b)
	}
}

func TestATargetThatAnswersProseIsNeverKept(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: structuredScenario(chaosllm.KindProseJSON, "")})
	const n = 4
	var ids []string
	for i := 0; i < n; i++ {
		spec := e.Spec(sqlSpec)
		spec.Input = map[string]any{"question": fmt.Sprintf("question %d", i)}
		ids = append(ids, e.Submit(t, spec))
	}
	for _, id := range ids {
		wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
		if s := wf.Steps[0]; s.Target != "an/m-an" {
			t.Fatalf("%s: sql kept %s's answer %q", id, s.Target, s.Output)
		}
		if _, err := spec.ParseJSONAnswer(wf.Steps[0].Output); err != nil {
			t.Fatalf("%s: kept output is not JSON: %v", id, err)
		}
	}
	st := e.Chaos.Snapshot()
	if got := st.Count("openai", "", chaosllm.KindProseJSON); got != 2*n {
		t.Fatalf("openai prose_json calls = %d, want %d (one repair per invalid answer)", got, 2*n)
	}
}

func TestEveryTargetInvalidDeadLettersTheStepWithTheOutput(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: structuredScenario(chaosllm.KindTruncatedJSON, chaosllm.KindTruncatedJSON)})
	id := e.Submit(t, e.Spec(sqlSpec))
	wf := e.Wait(t, id, 15*time.Second, store.StateBlocked)
	if s := wf.Steps[0]; s.State != store.StepDead || !strings.HasPrefix(s.Error, "invalid_output: ") {
		t.Fatalf("sql step %+v, want dead with invalid_output", s)
	}
	if wf.Steps[1].State != store.StepPending {
		t.Fatalf("explain ran without its input: %+v", wf.Steps[1])
	}
	st := e.Chaos.Snapshot()
	for _, ep := range []string{"openai", "anthropic"} {
		if got := st.Count(ep, "", chaosllm.KindTruncatedJSON); got != 2 {
			t.Fatalf("%s truncated_json calls = %d, want 2 (the answer and one repair); no retries of a step every target failed", ep, got)
		}
	}
	dls := waitDeadLetters(t, e, string(retry.InvalidOutput))
	if len(dls) != 1 {
		t.Fatalf("dead letters of class invalid_output: %+v", dls)
	}
	d, err := e.Client.DeadLetterDetail(t.Context(), dls[0].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Reason, "not a JSON document") || d.RejectedOutput == "" || !strings.HasPrefix(d.RejectedOutput, `{"query"`) {
		t.Fatalf("dead letter does not carry the validation error and the output: reason %q, rejected %q", d.Reason, d.RejectedOutput)
	}

	// the dashboard's dead-letter page shows the bad output
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/dlq/" + dls[0].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `id="rejected-output">{&#34;query&#34;`) {
		t.Fatalf("dead-letter page (%d) does not show the rejected output:\n%s", resp.StatusCode, page)
	}
}

func TestToolCallsComeBackWithTheStep(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	for _, route := range []string{"solo", "limited"} { // OpenAI, Anthropic
		id := e.Submit(t, e.Spec(`
name: tools
steps:
  - id: lookup
    route: `+route+`
    prompt: "What is the weather in Oslo?"
    temperature: 0.2
    tools:
      - name: get_weather
        description: Current weather for a city
        parameters:
          type: object
          required: [city]
          properties: { city: { type: string } }
`))
		wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
		var calls []struct{ ID, Name, Arguments string }
		if err := json.Unmarshal([]byte(wf.Steps[0].ToolCalls), &calls); err != nil || len(calls) != 1 || calls[0].Name != "get_weather" {
			t.Fatalf("tool calls %q: %v", wf.Steps[0].ToolCalls, err)
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(calls[0].Arguments), &args); err != nil || args["city"] == nil {
			t.Fatalf("tool call arguments %q: %v", calls[0].Arguments, err)
		}
	}
}

// bigJSON is a valid JSON answer of about n bytes.
func bigJSON(n int) string {
	return `{"cities": ["` + strings.Repeat("x", n) + `"]}`
}

// An answer over the step's output limit is never cut to fit and kept as
// done (a valid 1.4 MB JSON answer was cut to invalid JSON and its
// dependents failed pointing at the wrong step): it is output_too_large,
// the route moves on to its next target, and with no target left the
// step is dead-lettered naming the limit.
func TestAnAnswerOverTheOutputLimitIsNeverCut(t *testing.T) {
	t.Parallel()
	big := bigJSON(1_400_000)
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Answers: []chaosllm.Answer{
		{Match: "cities", Endpoint: "openai", Text: big}}}})
	spec := func(route string) string {
		return `name: big
steps:
  - id: plan
    route: ` + route + `
    prompt: "list the cities"
    output: { format: json, schema: { type: object, properties: { cities: { type: array, items: { type: string } } } } }
  - { id: use, route: solo, prompt: "use {{ .Steps.plan.Output | len }}", depends_on: [plan] }
`
	}
	// main: openai answers too much, anthropic answers: the step is done with anthropic's answer
	id := e.Submit(t, e.Spec(spec("main")))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if s := wf.Steps[0]; s.State != store.StepDone || !strings.HasPrefix(s.Target, "an/") || len(s.Output) > 1<<20 {
		t.Fatalf("plan on main: %s by %s, %d bytes; want done by anthropic", s.State, s.Target, len(s.Output))
	}
	if n := e.Calls.Count("oa/m-oa", retry.OutputTooLarge); n != 1 {
		t.Fatalf("openai's over-limit answers counted %d, want 1 (no retry on the same target)", n)
	}
	// solo: the only target answers too much: dead-lettered, the dependent never runs
	id = e.Submit(t, e.Spec(spec("solo")))
	wf = e.Wait(t, id, 20*time.Second, store.StateBlocked)
	s := wf.Steps[0]
	if s.State != store.StepDead || s.Class != string(retry.OutputTooLarge) || !strings.Contains(s.Error, "over the step's 1048576-byte output limit") || s.Output != "" {
		t.Fatalf("plan on solo: %s class %q error %q output %d bytes; want dead, output_too_large naming the limit, nothing kept",
			s.State, s.Class, s.Error, len(s.Output))
	}
	if wf.Steps[1].State != store.StepPending {
		t.Fatalf("use ran on a cut answer: %+v", wf.Steps[1])
	}
	if dls := waitDeadLetters(t, e, string(retry.OutputTooLarge)); len(dls) != 1 {
		t.Fatalf("dead letters of class output_too_large: %+v", dls)
	}
}

// A planning prompt chaosllm answers with a list of items (its answers:
// by prompt pattern) feeds a map, with nothing faked in Go.
func TestAMapOverAPlanChaosllmAnswers(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Answers: []chaosllm.Answer{
		{Match: "^Plan", Items: 5, Field: "cities"}}}})
	id := e.Submit(t, e.Spec(`name: trip
steps:
  - id: plan
    route: solo
    prompt: "Plan a trip"
    output: { format: json, schema: { type: object, required: [cities], properties: { cities: { type: array, items: { type: string } } } } }
  - { id: visit, for_each: "{{ .Steps.plan.JSON.cities }}", route: solo, prompt: "Describe {{ .Item }}", depends_on: [plan] }
`))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if m := wf.Steps[1].Map; m == nil || m.Items != 5 || m.Settled != 5 {
		t.Fatalf("map over the plan: %+v, want 5 items settled", wf.Steps[1].Map)
	}
}
