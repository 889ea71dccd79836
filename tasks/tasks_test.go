package tasks

import (
	"encoding/json"
	"testing"
)

// Garbage put into the queue by hand must be refused with a reason, never
// crash the worker.
func FuzzDecodePayload(f *testing.F) {
	f.Add([]byte(`{"wf":"wf_abc","step":"sql"}`))
	f.Add([]byte(`{"wf":"","step":"x"}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"wf":"a","step":"b","extra":[1,2,{"x":null}]}`))
	f.Add([]byte(`{"wf":"wf_abc","step":"sql","gen":2,"slack":300}`))
	f.Add([]byte(`{"wf":"wf_abc","step":"sql","slack":300}`))
	f.Add([]byte(`{"wf":"wf_abc","step":"sql","gen":1,"slack":300,"shape":"abcdefghijklmnopqrstuvwx"}`))
	f.Add([]byte(`{"wf":"wf_abc","step":"sql","shape":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePayload(b)
		if err == nil && (p.Workflow == "" || p.Step == "") {
			t.Fatalf("accepted a payload without ids: %q", b)
		}
		if err != nil && err.Error() == "" {
			t.Fatal("refusal without a reason")
		}
		// the fast path reads what encoding/json reads, or stands aside
		if fast, ok := canonicalPayload(b); ok {
			var slow Payload
			if jerr := json.Unmarshal(b, &slow); jerr != nil || slow != fast {
				t.Fatalf("%q: fast path %+v, encoding/json %+v (%v)", b, fast, slow, jerr)
			}
		}
		// and every payload json.Marshal writes takes the fast path
		if p.Workflow != "" && p.Step != "" && p.Gen >= 0 && p.Gen < 1e9 && p.Slack >= 0 && p.Slack < 1e9 {
			enc, _ := json.Marshal(p)
			if got, ok := canonicalPayload(enc); !ok && isPlainID(p.Workflow) && isPlainID(p.Step) && isPlainID(p.Shape) || ok && got != p {
				t.Fatalf("%s: fast path %+v %v", enc, got, ok)
			}
		}
	})
}

// isPlainID reports whether json.Marshal writes id without an escape.
func isPlainID(id string) bool {
	for _, c := range []byte(id) {
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
