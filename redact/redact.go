// Package redact removes secrets from text before it is logged, stored or
// shown: the configured secrets themselves (API keys, the Redis password,
// the dashboard token, webhook secrets), any run of 8 or more of their
// characters wherever it stands, and of their base64 forms, any prefix or
// suffix of one left at the edge of a cut, and text shaped like a key
// ("sk-…", "Bearer …") whoever it belongs to.
//
// It is for text that came back from the network or describes a failure
// (error messages, error bodies, reasons), never for model outputs, which
// are the user's data.
package redact

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Mask replaces a secret that has no label of its own, and a key-shaped
// token.
const Mask = "[redacted]"

// minEdge is the shortest piece of a secret that is removed when it stands
// at the start or end of a text (what a cut through the secret leaves).
// Shorter pieces are too likely to be ordinary text.
const minEdge = 6

// minSecret is the shortest value registered as a secret: shorter values
// ("", "x", a test's "k") would redact ordinary words.
const minSecret = 4

// shapes are the key-shaped tokens removed whatever their owner. The first
// matches OpenAI, Anthropic and most gateway keys; \b keeps words such as
// "risk-free" or "task-123" intact. A bearer token is 16 characters or more,
// so "Bearer authentication required" stays readable.
var shapes = []struct {
	re   *regexp.Regexp
	repl string
	lits []string // text the expression cannot match without one of (a text without any is left alone unscanned)
}{
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`), "sk-" + Mask, []string{"sk-"}},
	{regexp.MustCompile(`\b(Bearer|bearer|BEARER)(\s+)[A-Za-z0-9._~+/=-]{16,}`), "$1$2" + Mask, []string{"earer", "EARER"}},
}

type secret struct{ value, label string }

// Redactor removes a fixed set of secrets and every key-shaped token from
// text. The zero value and a nil *Redactor remove key-shaped tokens only.
// A Redactor is immutable and safe for concurrent use.
type Redactor struct {
	secrets []secret
	pieces  *pieces  // every 8-byte window of the secrets and their base64 forms
	forms   []string // the secrets and their base64 forms (Open)
}

// New returns a Redactor for the given secret values, each replaced by Mask.
// Values shorter than 4 bytes are ignored.
func New(values ...string) *Redactor {
	return (*Redactor)(nil).With(Mask, values...)
}

// With returns a new Redactor that also removes values, replacing each by
// label (for example a key's fingerprint, so a reader still knows which key
// was meant); a value it already removes takes the new label. The receiver
// is unchanged; nil is a valid receiver.
func (r *Redactor) With(label string, values ...string) *Redactor {
	n := &Redactor{}
	if r != nil {
		n.secrets = append(n.secrets, r.secrets...)
	}
next:
	for _, v := range values {
		if len(v) < minSecret {
			continue
		}
		for i := range n.secrets {
			if n.secrets[i].value == v { // known already: the newer label wins
				n.secrets[i].label = label
				continue next
			}
		}
		n.secrets = append(n.secrets, secret{value: v, label: label})
	}
	// longest first, so a secret that contains another is replaced whole
	for i := 1; i < len(n.secrets); i++ {
		for j := i; j > 0 && len(n.secrets[j].value) > len(n.secrets[j-1].value); j-- {
			n.secrets[j], n.secrets[j-1] = n.secrets[j-1], n.secrets[j]
		}
	}
	n.pieces = newPieces(n.secrets)
	n.forms = formsOf(n.secrets)
	return n
}

// Merge returns a Redactor that removes the secrets of both.
func (r *Redactor) Merge(o *Redactor) *Redactor {
	if o == nil {
		return r.With(Mask)
	}
	n := r.With(Mask)
	for _, s := range o.secrets {
		n = n.With(s.label, s.value)
	}
	return n
}

// String returns s without any secret, any run of 8 or more of a
// secret's characters wherever it stands (a key echoed in pieces), any
// such run of the secret's base64 forms (a gateway echoing "Basic
// base64(user:key)"), any piece of a secret at its start or end, or any
// key-shaped token.
func (r *Redactor) String(s string) string { return r.redact(s, true) }

// Part is String for a part of a longer text handed out piece by piece
// (a stream): a short run of a secret's characters at its start or end
// is left, since the text before or after it decides whether it is one
// (the caller holds back enough of what follows that a secret there is
// seen whole, or as a run of 8 or more).
func (r *Redactor) Part(s string) string { return r.redact(s, false) }

func (r *Redactor) redact(s string, edges bool) string {
	if s == "" {
		return s
	}
	if r != nil {
		for _, sec := range r.secrets {
			if strings.Contains(s, sec.value) {
				s = replaceWhole(s, sec.value, sec.label)
			}
		}
		s = r.pieces.remove(s)
		if edges {
			s = r.edges(s)
		}
	}
	for _, sh := range shapes {
		for _, l := range sh.lits {
			if strings.Contains(s, l) {
				s = sh.re.ReplaceAllString(s, sh.repl)
				break
			}
		}
	}
	return s
}

// edges removes the longest piece of a secret that ends s (a secret's start
// cut off by a truncation) or starts s (its end, when s is a window that
// began inside it).
func (r *Redactor) edges(s string) string {
	for _, sec := range r.secrets {
		v := sec.value
		for n := min(len(v)-1, len(s)); n >= minEdge; n-- {
			if s[len(s)-1] == v[n-1] && strings.HasSuffix(s, v[:n]) { // the last byte first: most lengths fail there
				s = s[:runeStart(s, len(s)-n)] + sec.label
				break
			}
		}
		for n := min(len(v)-1, len(s)); n >= minEdge; n-- {
			if s[0] == v[len(v)-n] && strings.HasPrefix(s, v[len(v)-n:]) {
				s = sec.label + s[runeEnd(s, n):]
				break
			}
		}
	}
	return s
}

// replaceWhole replaces every v in s by label. A secret's bytes need not be
// UTF-8 (a webhook secret's decoded bytes), so each replaced span is
// widened to whole runes: a rune the secret ends or starts inside goes
// with it, and valid text stays valid.
func replaceWhole(s, v, label string) string {
	var b strings.Builder
	last := 0 // s[last:] is not written yet
	for at := 0; ; {
		i := strings.Index(s[at:], v)
		if i < 0 {
			break
		}
		from, to := max(runeStart(s, at+i), last), runeEnd(s, at+i+len(v))
		b.WriteString(s[last:from])
		b.WriteString(label)
		last, at = to, to
	}
	b.WriteString(s[last:])
	return b.String()
}

// runeStart is i moved back to the start of the rune it stands in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeEnd is i moved on to the start of the next rune.
func runeEnd(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// Truncate returns s redacted and cut to at most n bytes (not counting the
// "…" that marks a cut) on a UTF-8 boundary. It redacts before the cut, so a
// secret the cut would split is already gone, and again after it, so a key
// whose beginning the cut left at the end (of a text that was already a
// window of something longer) is removed too.
func (r *Redactor) Truncate(s string, n int) string {
	s = r.String(s)
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return r.String(s[:cut]) + "…"
}
