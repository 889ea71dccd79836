package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/record"
)

// What the CLI prints as JSON, through the terminal-safe writer commands
// write to, decodes strictly to what was printed, and holds no raw DEL, C1
// control or bidi character: the indented documents and follow --json's
// event lines alike. A json.RawMessage's byte that is not UTF-8 is U+FFFD.
func TestJSONWritersEscapeEveryControlCharacter(t *testing.T) {
	text := "esc\x1b[2J del\x7f csi\u009b31m nel\u0085 rlo\u202e lri\u2066 lrm\u200e tab\t nl\n é 日本"
	type doc struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	check := func(what, out string, into any) {
		t.Helper()
		if !utf8.ValidString(out) {
			t.Fatalf("%s: not UTF-8: %q", what, out)
		}
		for _, r := range out {
			if r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x202e || r == 0x2066 || r == 0x200e {
				t.Fatalf("%s holds %U raw: %q", what, r, out)
			}
		}
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil || dec.More() {
			t.Fatalf("%s is not one JSON document (%v): %q", what, err, out)
		}
	}
	var b bytes.Buffer
	if err := printJSON(termSafe{&b}, doc{Name: text, Raw: json.RawMessage("\"raw \xc2\x9b \x9b\"")}); err != nil {
		t.Fatal(err)
	}
	var got doc
	check("printJSON", b.String(), &got)
	var raw string
	if got.Name != text || json.Unmarshal(got.Raw, &raw) != nil || raw != "raw \u009b \ufffd" {
		t.Fatalf("printJSON: decoded %q and %s, want %q and \"raw \\u009b \\ufffd\"", got.Name, got.Raw, text)
	}

	b.Reset()
	p := &eventPrinter{w: termSafe{&b}, json: true}
	e := record.Event{ID: "1-0", Type: record.EventDelta, Step: "s", Text: text, At: time.Unix(0, 0).UTC()}
	if err := p.print(e); err != nil {
		t.Fatal(err)
	}
	var ev record.Event
	check("follow --json", b.String(), &ev)
	if ev.Text != text || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("follow --json: decoded %q from %q", ev.Text, b.String())
	}
}
