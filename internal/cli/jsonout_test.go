package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/testenv"
)

// hostile holds a C0 control (ESC), DEL, C1 controls (U+009B, a terminal's
// CSI, and U+0085) and a bidi override: what a name, an input or an output
// may hold.
const hostile = "a\x1b[31m b\x7f c\u009b2J d\u0085 e\u202e f"

// strictJSON decodes out as exactly one JSON document (the CLI's --json),
// and checks it holds no raw DEL, no raw C1 control and no raw bidi
// character: each is escaped as \uXXXX.
func strictJSON(t *testing.T, out string) any {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("--json output is not UTF-8: %q", out)
	}
	for _, r := range out {
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x202e {
			t.Fatalf("--json output holds %U raw: %q", r, out)
		}
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%q", err, out)
	}
	if dec.More() {
		t.Fatalf("--json output holds more than one document: %q", out)
	}
	return v
}

// --json's documents stay JSON when what they print holds control and
// bidi characters: each is escaped (\u009b), none is written raw and none
// is escaped as the terminal's \x9b (not JSON).
func TestJSONOutputEscapesEveryControlCharacter(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	f := writeFile(t, "s.yaml", "name: research\nsteps:\n  - { id: search, route: solo, prompt: "+yamlQuoted(hostile)+" }\n")
	if r := run(t, cli.Enqueue, vars, "spec", "put", "research", f, "--config", cfg); r.code != 0 {
		t.Fatalf("spec put: exit %d, err %q", r.code, r.err)
	}
	r := run(t, cli.Enqueue, vars, "spec", "show", "research", "--json", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("spec show --json: exit %d, err %q", r.code, r.err)
	}
	v := strictJSON(t, r.out)
	steps := v.(map[string]any)["spec"].(map[string]any)["steps"].([]any)
	if got := steps[0].(map[string]any)["prompt"]; got != hostile {
		t.Fatalf("the prompt came back as %q, want %q", got, hostile)
	}

	if !bytes.Contains([]byte(r.out), []byte(`\u009b`)) {
		t.Fatalf("spec show --json does not escape U+009B as \\u009b: %q", r.out)
	}
}

// yamlQuoted is s in YAML's double-quoted style, every character that is
// not printable ASCII escaped (\uXXXX).
func yamlQuoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString("\\" + string(r))
		case r < 0x20 || r >= 0x7f:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
