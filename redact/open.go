package redact

import "strings"

// Open returns how many bytes at the end of s may be the start of
// something String removes, depending on the text that follows: the
// longest end of s that stands inside a secret or one of its base64 forms
// (ASCII letters folded, as runs are found), or a key-shaped token not
// finished yet ("sk-…", "Bearer …", or the start of either word). A
// stream hands out what comes before and holds this back until more text
// decides; the rest of a piece, ordinary text, need not wait.
func (r *Redactor) Open(s string) int {
	n := shapeOpen(s)
	if r != nil {
		for _, f := range r.forms {
			n = max(n, endInside(s, f))
		}
	}
	return n
}

// formsOf is every text whose pieces a Redactor removes: the secrets,
// and the base64 forms of those long enough to have runs.
func formsOf(secrets []secret) []string {
	var out []string
	for _, s := range secrets {
		out = append(out, s.value)
		if len(s.value) >= minPiece {
			out = append(out, base64Forms(s.value)...)
		}
	}
	return out
}

// endInside is the length of the longest end of s that stands somewhere
// in f, ASCII letters folded.
func endInside(s, f string) int {
	if s == "" {
		return 0
	}
	last, best := fold(s[len(s)-1]), 0
	for j := range len(f) {
		if fold(f[j]) != last {
			continue
		}
		k := 1
		for k <= j && k < len(s) && fold(f[j-k]) == fold(s[len(s)-1-k]) {
			k++
		}
		best = max(best, k)
	}
	return best
}

// shapeOpen is how much of s's end may be the start of a key-shaped
// token (shapes): "s", "sk", or "sk-" and what follows it at a word's
// start, while the key's characters run on; and a word that begins
// "Bearer", or "Bearer" with the spaces and token characters after it.
func shapeOpen(s string) int {
	n := 0
	// sk-…: the run of key characters s ends with
	run := len(s)
	for run > 0 && keyChar(s[run-1]) {
		run--
	}
	for i := run; i < len(s); i++ {
		if i > run && s[i-1] != '-' { // \b: a key starts a word
			continue
		}
		if t := s[i:]; strings.HasPrefix("sk-", t) || strings.HasPrefix(t, "sk-") {
			n = len(s) - i
			break
		}
	}
	// Bearer …: token characters, after spaces, after the word
	tok := len(s)
	for tok > 0 && tokenChar(s[tok-1]) {
		tok--
	}
	sp := tok
	for sp > 0 && space(s[sp-1]) {
		sp--
	}
	if sp < tok && sp >= len("bearer") && strings.EqualFold(s[sp-len("bearer"):sp], "bearer") {
		return max(n, len(s)-(sp-len("bearer")))
	}
	word := len(s)
	for word > 0 && len(s)-word < len("bearer") && letter(s[word-1]) {
		word--
	}
	for i := word; i < len(s); i++ {
		if strings.HasPrefix("bearer", strings.ToLower(s[i:])) {
			return max(n, len(s)-i)
		}
	}
	return n
}

// keyChar is a character of an "sk-" key; tokenChar one of a bearer
// token; space what separates "Bearer" from its token (RE2's \s).
func keyChar(c byte) bool { return letter(c) || '0' <= c && c <= '9' || c == '_' || c == '-' }

func tokenChar(c byte) bool { return keyChar(c) || strings.IndexByte(".~+/=", c) >= 0 }

func space(c byte) bool { return strings.IndexByte(" \t\n\f\r", c) >= 0 }

func letter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
