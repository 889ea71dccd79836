package chaosllm

import "testing"

// Both dialects read any body without panicking, and what they accept is
// a consistent conversation.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"a"},{"id":"a"}]},{"role":"tool","tool_call_id":"a","content":"error: x"},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"y"}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":9,"tools":[{"name":"f"}],"messages":[{"role":"assistant","content":[{"type":"text","text":""},{"type":"tool_use","id":"u"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"u","is_error":true,"content":null}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":{"a":1}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range []*dialect{openAIDialect, anthropicDialect} {
			r, err := d.parse(body)
			if err != nil {
				continue
			}
			if r.turn < 1 || len(r.fresh) > len(r.results) || (len(r.results) > 0 && !r.toolTalk) {
				t.Fatalf("%s accepted an inconsistent conversation: turn %d, %d results, %d fresh", d.name, r.turn, len(r.results), len(r.fresh))
			}
		}
	})
}
