package redact

import (
	"encoding/base64"
	"unicode/utf8"
)

// minPiece is the shortest run of a secret's characters removed wherever
// it stands in a text (a key echoed in two halves, or with a character
// changed, or in another letter case): every window of this many bytes of
// a secret is looked up.
// Shorter runs are too likely to be ordinary text.
const minPiece = 8

// pieces indexes every minPiece-byte window of the secrets, and of the
// base64 forms a gateway may echo (a key alone, or inside "Basic
// base64(user:key)" at any alignment), by the window's bytes.
type pieces struct {
	label map[uint64]string // window → the label of a secret it belongs to
	bloom [1 << 10]uint64   // a 64 Kibit filter of the windows: most windows of a text miss it
}

// window packs s[i:i+minPiece] into a uint64, ASCII letters folded to
// lower case: a key echoed upper-cased is found as well.
func window(s string, i int) uint64 {
	_ = s[i+minPiece-1]
	var w uint64
	for k := 7; k >= 0; k-- {
		w = w<<8 | uint64(fold(s[i+k]))
	}
	return w
}

// fold is an ASCII letter in lower case, any other byte as it is.
func fold(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func bit(w uint64) (int, uint64) {
	h := w * 0x9E3779B97F4A7C15 // Fibonacci hashing spreads the bytes over the top bits
	b := h >> 48
	return int(b >> 6), 1 << (b & 63)
}

func (p *pieces) add(v, label string) {
	for i := 0; i+minPiece <= len(v); i++ {
		w := window(v, i)
		if _, ok := p.label[w]; !ok {
			p.label[w] = label
		}
		at, m := bit(w)
		p.bloom[at] |= m
	}
}

// base64Forms are the parts of v's base64 encodings that stand in the
// encoding of any text holding v, whatever comes before it (three
// alignments) and after it, in the standard and URL alphabets.
func base64Forms(v string) []string {
	var out []string
	for pad := range 3 {
		b := make([]byte, pad+len(v))
		copy(b[pad:], v)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			e := enc.EncodeToString(b)
			// the first group holds the bytes before v when pad > 0, the
			// last one the bytes after it (or padding): neither is stable
			from, to := 0, len(e)-4
			if pad > 0 {
				from = 4
			}
			if to-from >= minPiece {
				out = append(out, e[from:to])
			}
		}
	}
	return out
}

func newPieces(secrets []secret) *pieces {
	p := &pieces{label: map[uint64]string{}}
	for _, s := range secrets {
		if len(s.value) < minPiece {
			continue
		}
		p.add(s.value, s.label)
		for _, f := range base64Forms(s.value) {
			p.add(f, s.label)
		}
	}
	if len(p.label) == 0 {
		return nil
	}
	return p
}

// remove replaces every run of s made of windows of a secret (each
// overlapping or touching the next, so a run is at least minPiece bytes)
// by the label of the secret its first window belongs to.
func (p *pieces) remove(s string) string {
	if p == nil || len(s) < minPiece {
		return s
	}
	var (
		out              []byte
		last             int // s[last:] is not copied to out yet
		runStart, runEnd = -1, 0
		runLabel         string
	)
	flush := func() {
		for runStart > last && !utf8.RuneStart(s[runStart]) { // no rune cut in half
			runStart--
		}
		runStart = max(runStart, last) // a run may begin inside the previous one's widened end
		for runEnd < len(s) && !utf8.RuneStart(s[runEnd]) {
			runEnd++
		}
		if out == nil {
			out = make([]byte, 0, len(s))
		}
		out = append(append(out, s[last:runStart]...), runLabel...)
		last, runStart = runEnd, -1
	}
	w := window(s, 0)
	for i := 0; i+minPiece <= len(s); i++ {
		if i > 0 { // the window moves one byte: the next byte comes in on top
			w = w>>8 | uint64(fold(s[i+minPiece-1]))<<56
		}
		if at, m := bit(w); p.bloom[at]&m == 0 {
			continue
		}
		label, ok := p.label[w]
		if !ok {
			continue
		}
		if runStart >= 0 && i > runEnd {
			flush()
		}
		if runStart < 0 {
			runStart, runLabel = i, label
		}
		runEnd = max(runEnd, i+minPiece)
	}
	if runStart >= 0 {
		flush()
	}
	if out == nil {
		return s
	}
	return string(append(out, s[last:]...))
}
