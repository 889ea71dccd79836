package chaosllm

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

const scriptYAML = `
tool_script:
  - turn: 1
    calls:
      - { name: fetch_figure, arguments: { region: north } }
      - { name: fetch_figure, arguments: { region: south } }
  - turn: 2
    text: adding them up
    calls:
      - { name: add, arguments: { a: 1, b: 2 } }
`

func scriptServer(t *testing.T, spec string) (*Server, string) {
	t.Helper()
	sc, err := ParseScenario([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

const oaTools = `"tools":[{"type":"function","function":{"name":"fetch_figure","parameters":{"type":"object","properties":{"region":{"type":"string"}}}}}]`
const anTools = `"tools":[{"name":"fetch_figure","input_schema":{"type":"object","properties":{"region":{"type":"string"}}}}]`

// The wire shapes here are written out by hand from the providers' API
// references, not taken from any client.
func TestScriptedTurnsOnTheOpenAIWire(t *testing.T) {
	srv, url := scriptServer(t, scriptYAML)
	oa := url + "/v1/chat/completions"
	var ans struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	code, _, body := post(t, oa, "k", `{"model":"m",`+oaTools+`,"messages":[{"role":"user","content":"figures?"}]}`)
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Choices) != 1 {
		t.Fatalf("turn 1: %d %s", code, body)
	}
	c := ans.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 2 ||
		c.Message.ToolCalls[0].ID == c.Message.ToolCalls[1].ID || c.Message.ToolCalls[0].Type != "function" ||
		c.Message.ToolCalls[1].Function.Name != "fetch_figure" || c.Message.ToolCalls[1].Function.Arguments != `{"region":"south"}` {
		t.Fatalf("turn 1: %s", body)
	}
	id1, id2 := c.Message.ToolCalls[0].ID, c.Message.ToolCalls[1].ID
	turn2 := `{"model":"m",` + oaTools + `,"messages":[{"role":"user","content":"figures?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"` + id1 + `","type":"function","function":{"name":"fetch_figure","arguments":"{}"}},{"id":"` + id2 + `","type":"function","function":{"name":"fetch_figure","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"` + id2 + `","content":"south is 7"},
		{"role":"tool","tool_call_id":"` + id1 + `","content":"Error: north is down"}]}`
	code, _, body = post(t, oa, "k", turn2)
	if code != 200 || !strings.Contains(body, `"content":"adding them up"`) || !strings.Contains(body, `"name":"add"`) {
		t.Fatalf("turn 2: %d %s", code, body)
	}
	turn3 := strings.TrimSuffix(turn2, "]}") + `,{"role":"assistant","content":"adding","tool_calls":[{"id":"x1","type":"function","function":{"name":"add","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"x1","content":"sum is 3"}]}`
	code, _, body = post(t, oa, "k", turn3)
	want := "final answer using results: south is 7; error: north is down; sum is 3"
	if code != 200 || !strings.Contains(body, `"content":"`+want+`"`) || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Fatalf("turn 3: %d %s, want %q", code, body, want)
	}
	st := srv.Snapshot()
	for turn, want := range map[int]ToolTurn{
		1: {Endpoint: "openai", Turn: 1, Answers: 1, Calls: 2, Results: 2, ErrorResults: 1},
		2: {Endpoint: "openai", Turn: 2, Answers: 1, Calls: 1, Results: 1},
		3: {Endpoint: "openai", Turn: 3, Answers: 1},
	} {
		if got := st.ToolTurn("openai", turn); got != want {
			t.Errorf("turn %d: %+v, want %+v", turn, got, want)
		}
	}
}

func TestScriptedTurnsOnTheAnthropicWire(t *testing.T) {
	srv, url := scriptServer(t, scriptYAML)
	an := url + "/v1/messages"
	var ans struct {
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, ID, Name, Text string
			Input                json.RawMessage
		} `json:"content"`
	}
	start := `{"model":"m","max_tokens":50,` + anTools + `,"messages":[{"role":"user","content":"figures?"}`
	code, _, body := post(t, an, "k", start+`]}`)
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.StopReason != "tool_use" || len(ans.Content) != 2 ||
		ans.Content[0].Type != "tool_use" || ans.Content[0].ID == ans.Content[1].ID || string(ans.Content[0].Input) != `{"region":"north"}` {
		t.Fatalf("turn 1: %d %s", code, body)
	}
	id1, id2 := ans.Content[0].ID, ans.Content[1].ID
	calls := `,{"role":"assistant","content":[{"type":"tool_use","id":"` + id1 + `","name":"fetch_figure","input":{}},{"type":"tool_use","id":"` + id2 + `","name":"fetch_figure","input":{}}]}`
	results := `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id1 + `","content":"north is 5"},{"type":"tool_result","tool_use_id":"` + id2 + `","is_error":true,"content":[{"type":"text","text":"south is down"}]}]}`
	code, _, body = post(t, an, "k", start+calls+results+`]}`)
	ans.Content = nil
	if code != 200 || json.Unmarshal([]byte(body), &ans) != nil || len(ans.Content) != 2 ||
		ans.Content[0].Type != "text" || ans.Content[0].Text != "adding them up" || ans.Content[1].Name != "add" {
		t.Fatalf("turn 2: %d %s", code, body)
	}
	// the results of one turn split over two user messages: Anthropic
	// wants them all in the message right after the calls
	split := `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id1 + `","content":"north is 5"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id2 + `","content":"x"}]}`
	if code, _, body := post(t, an, "k", start+calls+split+`]}`); code != 400 || !strings.Contains(body, "go in one user message") {
		t.Fatalf("split results: %d %s", code, body)
	}
	// a stream follows the script too: turn 2's text, then its call, its
	// arguments in pieces
	code, _, body = post(t, an, "k", strings.Replace(start, `"model"`, `"stream":true,"model"`, 1)+calls+results+`]}`)
	if code != 200 || !strings.Contains(body, `"text":"adding "`) || !strings.Contains(body, `"type":"tool_use"`) || !strings.Contains(body, `"name":"add"`) ||
		strings.Count(body, "input_json_delta") != 2 || !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Fatalf("stream: %d %s", code, body)
	}
	st := srv.Snapshot()
	if got := st.ToolTurn("anthropic", 1); got.Calls != 2 || got.Results != 4 || got.ErrorResults != 2 || got.Answers != 1 {
		t.Errorf("turn 1 (two requests brought its results back): %+v", got)
	}
	if got := st.ToolTurn("anthropic", 2); got.Answers != 2 || got.Calls != 2 { // the plain request and the stream, each calling add
		t.Errorf("turn 2: %+v", got)
	}
}

func TestDefaultToolConversationHasTwoTurns(t *testing.T) {
	srv, url := scriptServer(t, "")
	oa := url + "/v1/chat/completions"
	code, _, body := post(t, oa, "k", `{"model":"m",`+oaTools+`,"messages":[{"role":"user","content":"figures?"}]}`)
	if code != 200 || !strings.Contains(body, `"name":"fetch_figure"`) || !strings.Contains(body, `"id":"call_`) {
		t.Fatalf("first turn: %d %s", code, body)
	}
	code, _, body = post(t, oa, "k", `{"model":"m",`+oaTools+`,"messages":[{"role":"user","content":"figures?"},
		{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"fetch_figure","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"north is 5"}]}`)
	if code != 200 || !strings.Contains(body, "final answer using results: north is 5") || strings.Contains(body, "tool_calls\":[") {
		t.Fatalf("second turn: %d %s", code, body)
	}
	if st := srv.Snapshot(); st.ToolTurn("", 1).Calls != 1 || st.ToolTurn("", 1).Results != 1 || st.ToolTurn("", 2).Calls != 0 {
		t.Fatalf("stats %+v", st.ToolTurns)
	}
}

func TestToolPairingIsChecked(t *testing.T) {
	_, url := scriptServer(t, "")
	oaCall := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	for name, c := range map[string]struct{ path, body, want string }{
		"openai result for no call":     {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"zz","content":"r"}]}`, `answers no call`},
		"openai call without result":    {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"},` + oaCall + `,{"role":"user","content":"next"}]}`, `tool call \"c1\" has no result`},
		"openai ends unanswered":        {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"},` + oaCall + `]}`, `unanswered`},
		"openai result without content": {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"},` + oaCall + `,{"role":"tool","tool_call_id":"c1"}]}`, `needs a tool_call_id and content`},
		"openai content a number":       {"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":5}]}`, `not a string or a list of parts`},
		"anthropic result in assistant": {"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`, `belongs in a user message`},
		"anthropic use in user":         {"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, `belongs in an assistant message`},
	} {
		if code, _, body := post(t, url+c.path, "k", c.body); code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", name, code, body, c.want)
		}
	}
}

func TestToolScriptValidation(t *testing.T) {
	for in, want := range map[string]string{
		"tool_script:\n  - { turn: 2, calls: [ { name: f } ] }\n":                     "tool_script[0].turn (line 2): 2, want 1",
		"tool_script:\n  - { calls: [] }\n":                                           "tool_script[0].calls (line 2): a scripted turn needs a call",
		"tool_script:\n  - calls:\n      - { arguments: { a: 1 } }\n":                 "tool_script[0].calls[0].name (line 3): empty",
		"tool_script:\n  - calls:\n      - { name: f, args: {} }\n":                   "line 3: field args is not one of [name arguments]",
		"tool_script:\n  - { calls: [ { name: f, arguments: [1, 2] } ] }\n":           "line 2",
		"tool_script:\n  - { calls: [ { name: f, arguments: { x: .nan } } ] }\n":      "tool_script[0].calls[0].arguments (line 2): cannot be sent as JSON",
		"tool_script:\n  - { calls: [ { name: f, arguments: { x: { 1: 2 } } } ] }\n":  "cannot be sent as JSON",
		"tool_script:\n  - { turn: 1, text: hi, calls: [ { name: f } ], extra: 1 }\n": "field extra is not one of",
	} {
		if _, err := ParseScenario([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
	sc, err := ParseScenario([]byte(`{"tool_script": [{"calls": [{"name": "f", "arguments": {"a": [1, "b"]}}]}, {"turn": 2, "calls": [{"name": "g"}]}]}`))
	if err != nil || len(sc.ToolScript) != 2 || sc.ToolScript[1].Calls[0].Name != "g" {
		t.Fatalf("a JSON script: %+v %v", sc.ToolScript, err)
	}
	if _, err := New(Scenario{ToolScript: []ScriptTurn{{Calls: []ScriptCall{{Name: "f", Arguments: map[string]any{"c": make(chan int)}}}}}}, Options{}); err == nil {
		t.Fatal("New took arguments that cannot be sent")
	}
}
