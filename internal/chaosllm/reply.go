package chaosllm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Reply is the deterministic answer to a prompt: the same prompt always gets
// the same text, and different prompts get different texts.
func Reply(prompt string) string {
	sum := sha256.Sum256([]byte(prompt))
	head := strings.Join(strings.Fields(prompt), " ")
	if utf8.RuneCountInString(head) > 60 {
		head = string([]rune(head)[:60]) + "…"
	}
	return "chaosllm answer " + hex.EncodeToString(sum[:4]) + " to: " + head
}

// tokens is a rough token count: words.
func tokens(s string) int { return len(strings.Fields(s)) }

// chunks splits a reply into the pieces a stream sends: words with their
// following space.
func chunks(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}
