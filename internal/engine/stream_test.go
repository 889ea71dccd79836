package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
)

// streamedText is what a reader of the log makes of a step's stream: its
// deltas since the last stream_reset, and how many resets it saw.
func streamedText(t *testing.T, e *testenv.Env, wf, step string) (string, int) {
	t.Helper()
	evs, err := e.Store.Events(context.Background(), wf, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	resets := 0
	for _, ev := range evs {
		if ev.Step != step {
			continue
		}
		switch ev.Type {
		case record.EventDelta:
			b.WriteString(ev.Text)
		case record.EventStreamReset:
			b.Reset()
			resets++
		}
	}
	return b.String(), resets
}

// longAnswer is over 1 KiB several times: its text is logged in several
// step.delta events however fast it streams.
var longAnswer = strings.Repeat("Streams arrive piece by piece; this answer is long enough to be sent in many pieces, "+
	"and a reader that joins them gets back exactly what the step stored as its output, no more and no less. ", 20)

// A streaming prompt step's deltas, joined, are its stored output, on
// both dialects.
func TestStreamedDeltasJoinToTheStoredOutput(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Answers: []chaosllm.Answer{{Match: "stream", Text: longAnswer}}}})
	id := e.Submit(t, e.Spec(`
name: streams
steps:
  - { id: openai, route: solo, prompt: "stream one", stream: true }
  - { id: anthropic, route: limited, prompt: "stream two", stream: true }
`))
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	for _, s := range wf.Steps {
		text, resets := streamedText(t, e, id, s.ID)
		if text != s.Output || s.Output != longAnswer || resets != 0 {
			t.Errorf("%s: the deltas join to %q (%d resets), the output is %q", s.ID, text, resets, s.Output)
		}
		if n := countEvents(t, e, id, s.ID, record.EventDelta); n < 3 {
			t.Errorf("%s: %d deltas: the text did not stream", s.ID, n)
		}
	}
}

// A stream that fails midway fails over to the route's next target: the
// log says step.stream_reset, and the text after it is the output.
func TestAStreamFailingMidwayFailsOverAndSaysSo(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{
		Answers: []chaosllm.Answer{{Match: "stream", Text: longAnswer}},
		Timelines: []chaosllm.Timeline{{Endpoint: "openai", Phases: []chaosllm.Phase{
			// the error comes after 300 chunks: well past the text a stream
			// holds back, so readers have seen some when it fails
			{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindStreamError, Chunks: 300}}, {}}}}}})
	id := e.Submit(t, e.Spec(`
name: failover
steps:
  - { id: s, route: main, prompt: "stream it", stream: true }
`))
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	s := wf.Steps[0]
	text, resets := streamedText(t, e, id, "s")
	if resets != 1 || text != s.Output || s.Target != "an/m-an" || s.Attempts != 1 {
		t.Fatalf("resets %d, text after the reset %q, step %+v", resets, text, s)
	}
	calls := eventsOf(t, e, id, "s", record.EventLLMCall)
	if len(calls) != 2 || calls[0].Target != "oa/m-oa" || calls[0].Class == "" || calls[1].Target != "an/m-an" || calls[1].Class != "" || calls[1].CompletionTokens == 0 {
		t.Fatalf("llm calls %+v", calls)
	}
}

// A code step's LLM().Stream logs its deltas and returns the whole answer.
func TestCodeStepStreams(t *testing.T) {
	var got []string
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Answers: []chaosllm.Answer{{Match: "stream", Text: longAnswer}}},
		Steps: map[string]engine.StepFunc{"writer": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			ans, err := s.LLM().Stream(ctx, "solo", chatRequest("stream please"), func(d string) { got = append(got, d) })
			if err != nil {
				return nil, err
			}
			return ans.Text, nil
		}}})
	id := e.Submit(t, e.Spec(`
name: code
steps:
  - { id: w, run: writer }
`))
	e.Wait(t, id, 15*time.Second, store.StateCompleted)
	text, _ := streamedText(t, e, id, "w")
	if text != longAnswer || strings.Join(got, "") != longAnswer || len(got) < 2 {
		t.Fatalf("logged %q; onDelta got %d pieces: %q", text, len(got), strings.Join(got, ""))
	}
}

func eventsOf(t *testing.T, e *testenv.Env, wf, step, typ string) []record.Event {
	t.Helper()
	evs, err := e.Store.Events(context.Background(), wf, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Event
	for _, ev := range evs {
		if ev.Step == step && ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func countEvents(t *testing.T, e *testenv.Env, wf, step, typ string) int {
	return len(eventsOf(t, e, wf, step, typ))
}

func chatRequest(prompt string) llmclient.Request {
	return llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: prompt}}}
}

// A step with tools and stream: true streams each turn's text; its tool
// turns come between them, and the text after the last turn of tool
// calls joins to the stored output (the final answer), on both dialects.
func TestAToolStepStreamsEachTurn(t *testing.T) {
	e := testenv.Start(t, testenv.Options{
		Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{
			{Text: "checking the figures first", Calls: []chaosllm.ScriptCall{call("fetch_figure", map[string]any{"region": "north"})}}}},
		Tools: map[string]engine.Tool{"fetch_figure": figureTool("streaming worker", nil)}})
	for _, d := range dialects {
		id := e.Submit(t, e.Spec(toolStep(d.route, "[fetch_figure]", "    stream: true\n")))
		wf := e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked)
		s := wf.Steps[0]
		if wf.State != store.StateCompleted {
			t.Fatalf("%s: %s %+v", d.route, wf.State, s)
		}
		evs, _ := e.Store.Events(context.Background(), id, "", 1000)
		var seq []string
		var before, after strings.Builder
		turned := false
		for _, ev := range evs {
			if ev.Step != "ask" {
				continue
			}
			switch ev.Type {
			case record.EventDelta:
				if turned {
					after.WriteString(ev.Text)
				} else {
					before.WriteString(ev.Text)
				}
				if len(seq) == 0 || seq[len(seq)-1] != "delta" {
					seq = append(seq, "delta")
				}
			case record.EventToolTurn:
				turned = true
				seq = append(seq, "tool.turn "+strings.Join(ev.Tools, ","))
			case record.EventLLMCall, record.EventDone:
				seq = append(seq, ev.Type)
			}
		}
		if want := "delta llm.call tool.turn fetch_figure delta llm.call step.done"; strings.Join(seq, " ") != want {
			t.Errorf("%s: the step's log %q, want %q", d.route, strings.Join(seq, " "), want)
		}
		if before.String() != "checking the figures first" || after.String() != s.Output || !strings.Contains(s.Output, "north: 1200") {
			t.Errorf("%s: streamed %q then %q; output %q", d.route, before.String(), after.String(), s.Output)
		}
	}
}
