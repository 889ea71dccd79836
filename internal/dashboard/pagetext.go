package dashboard

import (
	"bytes"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/spec"
)

// page renders a page as render does, through bidiSafe: every string a
// page shows (names, inputs, outputs, errors, messages) passes through
// it, whatever template shows it.
func (s *Server) page(w http.ResponseWriter, r *http.Request, name, title string, data map[string]any) {
	b := &bidiSafe{ResponseWriter: w}
	s.render(b, r, name, title, data)
	b.flush()
}

// bidiSafe holds a page's body and writes it with each bidirectional
// formatting character (spec.IsHidingRune: U+202A–U+202E, U+2066–U+2069,
// U+200E, U+200F, U+061C) shown as its escape (\u202e) instead of
// reordering the text around it: a workflow's input or output holding
// U+202E could otherwise show a name, an amount or a link as another.
// The pages' own text holds none, and in a script a \u escape in a string
// is the same character, so only what users wrote changes, and visibly.
type bidiSafe struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (b *bidiSafe) Write(p []byte) (int, error) { return b.body.Write(p) }

// flush writes the held body, neutralised (neutralBidi).
func (b *bidiSafe) flush() {
	_, _ = b.ResponseWriter.Write(neutralBidi(b.body.Bytes()))
}

// neutralBidi is p with each bidirectional formatting character written
// as its \uXXXX escape.
func neutralBidi(p []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if spec.IsHidingRune(r) {
			out = append(out, p[last:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			last = i + n
		}
		i += n
	}
	if out == nil {
		return p
	}
	return append(out, p[last:]...)
}
