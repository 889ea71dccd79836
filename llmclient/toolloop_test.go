package llmclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/llmclient"
)

// The model-tool loop a worker runs, in small: call, run the calls here,
// append the model's turn and the results, call again, until a final
// answer. chaosllm plays the model from a script; both real SDKs carry the
// conversation over real HTTP.

var loopTools = []llmclient.Tool{
	{Name: "fetch_figure", Description: "The sales figure of a region", Parameters: map[string]any{
		"type": "object", "required": []any{"region"}, "properties": map[string]any{"region": map[string]any{"type": "string"}}}},
	{Name: "add", Description: "Adds two numbers", Parameters: map[string]any{
		"type": "object", "required": []any{"a", "b"}, "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}}},
}

// runTool is the test's tool executor: a result, or an error result for an
// unknown tool or arguments that break the tool's schema.
func runTool(c llmclient.ToolCall) (string, bool) {
	var args map[string]any
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		return fmt.Sprintf("%s: arguments are not a JSON object: %v", c.Name, err), true
	}
	switch c.Name {
	case "fetch_figure":
		region, ok := args["region"].(string)
		if !ok {
			return fmt.Sprintf("fetch_figure: region must be a string, not %v", args["region"]), true
		}
		return fmt.Sprintf("%s sold %d", region, 100*len(region)), false
	case "add":
		a, okA := args["a"].(float64)
		b, okB := args["b"].(float64)
		if !okA || !okB {
			return "add: a and b must be numbers", true
		}
		return "sum is " + strconv.FormatFloat(a+b, 'f', -1, 64), false
	}
	return "no tool named " + c.Name, true
}

// toolLoop is one conversation.
type toolLoop struct {
	req     llmclient.Request // the conversation so far: the next request
	answers []*llmclient.Response
	results []llmclient.Message // every result sent back
}

func newToolLoop(prompt string) *toolLoop {
	return &toolLoop{req: llmclient.Request{Model: "m-1", Tools: loopTools,
		Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: prompt}}}}
}

// run calls p until a final answer (at most maxTurns calls) and returns it.
func (l *toolLoop) run(t *testing.T, p llmclient.Provider, maxTurns int) *llmclient.Response {
	t.Helper()
	for range maxTurns {
		resp, err := p.Chat(context.Background(), l.req)
		if err != nil {
			t.Fatalf("turn %d: %v", len(l.answers)+1, err)
		}
		l.answers = append(l.answers, resp)
		if len(resp.ToolCalls) == 0 {
			return resp
		}
		l.req.Messages = append(l.req.Messages, resp.AssistantMessage())
		for _, c := range resp.ToolCalls {
			content, isErr := runTool(c)
			r := llmclient.ToolResultMessage(c.ID, content, isErr)
			l.req.Messages = append(l.req.Messages, r)
			l.results = append(l.results, r)
		}
	}
	t.Fatalf("no final answer after %d turns", maxTurns)
	return nil
}

func scriptFixture(t *testing.T, script string) fixture {
	t.Helper()
	sc, err := chaosllm.ParseScenario([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, sc)
}

func TestScriptedToolConversation(t *testing.T) {
	f := scriptFixture(t, `
tool_script:
  - turn: 1
    calls:
      - { name: fetch_figure, arguments: { region: north } }
      - { name: fetch_figure, arguments: { region: south } }
  - turn: 2
    text: Adding the two figures.
    calls:
      - { name: add, arguments: { a: 500, b: 500 } }
`)
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			l := newToolLoop("What did north and south sell together?")
			final := l.run(t, p, 5)
			if len(l.answers) != 3 {
				t.Fatalf("%d answers, want 3", len(l.answers))
			}
			first, second := l.answers[0], l.answers[1]
			if first.FinishReason != llmclient.FinishToolCalls || second.FinishReason != llmclient.FinishToolCalls || final.FinishReason != llmclient.FinishStop {
				t.Errorf("finish reasons %q, %q, %q; want tool_calls, tool_calls, stop", first.FinishReason, second.FinishReason, final.FinishReason)
			}
			if len(first.ToolCalls) != 2 || first.ToolCalls[0].ID == "" || first.ToolCalls[0].ID == first.ToolCalls[1].ID ||
				first.ToolCalls[0].Arguments != `{"region":"north"}` || first.ToolCalls[1].Arguments != `{"region":"south"}` {
				t.Errorf("turn 1 calls %+v: want two fetch_figure calls with distinct ids", first.ToolCalls)
			}
			if second.Text != "Adding the two figures." || len(second.ToolCalls) != 1 || second.ToolCalls[0].Name != "add" {
				t.Errorf("turn 2: text %q, calls %+v", second.Text, second.ToolCalls)
			}
			want := "final answer using results: north sold 500; south sold 500; sum is 1000"
			if final.Text != want || len(final.ToolCalls) != 0 {
				t.Errorf("final answer %q (calls %+v), want %q", final.Text, final.ToolCalls, want)
			}
			// the two results of turn 1 came back in one follow-up request
			st := f.Srv.Snapshot()
			for turn, w := range map[int]chaosllm.ToolTurn{
				1: {Endpoint: ep, Turn: 1, Answers: 1, Calls: 2, Results: 2},
				2: {Endpoint: ep, Turn: 2, Answers: 1, Calls: 1, Results: 1},
				3: {Endpoint: ep, Turn: 3, Answers: 1},
			} {
				if got := st.ToolTurn(ep, turn); got != w {
					t.Errorf("chaosllm turn %d: %+v, want %+v", turn, got, w)
				}
			}

			// the same conversation, its last request streamed
			s, err := p.ChatStream(context.Background(), l.req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Collect()
			if err != nil {
				t.Fatalf("stream of a tool conversation: %v", err)
			}
			if got.Text != want || got.FinishReason != llmclient.FinishStop || len(got.ToolCalls) != 0 {
				t.Errorf("streamed: %q finish %q, want %q and stop", got.Text, got.FinishReason, want)
			}
		})
	}
}

// An unknown tool and arguments that break the schema reach the caller as
// calls; the errors it sends back are marked as errors on the wire.
func TestToolErrorsGoBackMarked(t *testing.T) {
	f := scriptFixture(t, `
tool_script:
  - calls:
      - { name: delete_everything, arguments: { really: true } }
      - { name: fetch_figure, arguments: { region: 7 } }
      - { name: fetch_figure, arguments: { region: east } }
`)
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			l := newToolLoop("East?")
			final := l.run(t, p, 3)
			calls := l.answers[0].ToolCalls
			if len(calls) != 3 || calls[0].Name != "delete_everything" || calls[0].Arguments != `{"really":true}` ||
				calls[1].Name != "fetch_figure" || calls[1].Arguments != `{"region":7}` {
				t.Fatalf("calls %+v: want the unknown tool and the bad arguments as sent", calls)
			}
			if !l.results[0].IsError || !l.results[1].IsError || l.results[2].IsError {
				t.Fatalf("results %+v: want two errors, then a result", l.results)
			}
			want := "final answer using results: error: no tool named delete_everything; " +
				"error: fetch_figure: region must be a string, not 7; east sold 400"
			if final.Text != want || final.FinishReason != llmclient.FinishStop {
				t.Errorf("final %q (%s), want %q", final.Text, final.FinishReason, want)
			}
			if got := f.Srv.Snapshot().ToolTurn(ep, 1); got.Results != 3 || got.ErrorResults != 2 {
				t.Errorf("chaosllm turn 1: %+v, want 3 results of which 2 errors", got)
			}
		})
	}
}

// Without a script a model calls the first tool once and then answers;
// an empty result is sent in a form each provider takes.
func TestDefaultToolConversation(t *testing.T) {
	f := newFixture(t, chaosllm.Scenario{})
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			l := newToolLoop("North?")
			resp, err := p.Chat(context.Background(), l.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != llmclient.FinishToolCalls || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "fetch_figure" {
				t.Fatalf("first answer %+v", resp)
			}
			l.req.Messages = append(l.req.Messages, resp.AssistantMessage(), llmclient.ToolResultMessage(resp.ToolCalls[0].ID, "", false))
			final, err := p.Chat(context.Background(), l.req)
			if err != nil {
				t.Fatalf("after an empty result: %v", err)
			}
			if final.FinishReason != llmclient.FinishStop || len(final.ToolCalls) != 0 || !strings.HasPrefix(final.Text, "final answer using results: ") {
				t.Errorf("second answer %+v", final)
			}
			plain, err := p.Chat(context.Background(), ask("no tools here"))
			if err != nil || plain.FinishReason != llmclient.FinishStop {
				t.Errorf("a plain answer: %+v %v", plain, err)
			}
		})
	}
}
