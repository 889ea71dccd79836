package cli

import (
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/spec"
)

// termSafe escapes what would act on a terminal instead of being shown:
// control characters but newline and tab (ESC starts colour and title
// sequences, CR overwrites a line) and the bidirectional formatting
// characters that reorder what is shown (spec.IsHidingRune). Text comes
// from workflow names, step outputs, errors and providers: nothing of it
// may recolour the terminal, set its title or disguise a line. JSON stays
// JSON: the CLI's JSON writers (jsonout.go) escape every control and bidi
// character as \uXXXX before it gets here, so nothing is left to escape.
type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if escapeRune(r, n) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return t.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if escapeRune(r, n) {
			if r == utf8.RuneError {
				out = fmt.Appendf(out, `\x%02x`, p[i]) // the byte itself
			} else if r < 0x100 {
				out = fmt.Appendf(out, `\x%02x`, r)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		} else {
			out = append(out, p[i:i+n]...)
		}
		i += n
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeRune: the rune (of n bytes) acts on a terminal. A byte that is not
// UTF-8 is escaped too: 0x9b alone is a terminal's 8-bit control sequence
// introducer.
func escapeRune(r rune, n int) bool {
	if r == utf8.RuneError && n <= 1 {
		return n == 1
	}
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || spec.IsHidingRune(r)
}

// terminalSafe is env with its writers escaping (termSafe).
func (e Env) terminalSafe() Env {
	if _, ok := e.Out.(termSafe); !ok && e.Out != nil {
		e.Out = termSafe{e.Out}
	}
	if _, ok := e.Err.(termSafe); !ok && e.Err != nil {
		e.Err = termSafe{e.Err}
	}
	return e
}
