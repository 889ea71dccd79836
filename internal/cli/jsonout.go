package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/spec"
)

// Every JSON the CLI prints goes through printJSON (one indented
// document) or printJSONLine (one compact line): both escape, as \uXXXX,
// what encoding/json writes raw and a terminal acts on (jsonSafe), so the
// output is the same JSON whatever writer it goes to (termSafe finds
// nothing left to escape in it).

// printJSON writes v as one indented JSON document.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsonSafe(b), '\n'))
	return err
}

// printJSONLine writes v as JSON on one line.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsonSafe(b), '\n'))
	return err
}

// jsonSafe escapes in encoding/json's output what it leaves raw in
// strings: DEL, the C1 controls (U+0080–U+009F; U+009B is a terminal's
// control sequence introducer) and the bidirectional formatting characters
// (spec.IsHidingRune); a byte that is not UTF-8 (from a json.RawMessage)
// becomes U+FFFD, as encoding/json makes it in a string. C0 controls are
// escaped by encoding/json already. Outside strings JSON holds none of
// these, so each escape lands in a string and means the same character.
func jsonSafe(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if jsonEscapes(r, n) {
			break
		}
		i += n
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if jsonEscapes(r, n) {
			out = fmt.Appendf(out, `\u%04x`, r) // RuneError: \ufffd
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

func jsonEscapes(r rune, n int) bool {
	return (r == utf8.RuneError && n == 1) || (r >= 0x7f && r < 0xa0) || spec.IsHidingRune(r)
}
