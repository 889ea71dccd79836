package redact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentq/agentq/redact"
)

const key = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz"

func TestString(t *testing.T) {
	r := redact.New(key, "hunter2-redis-password").With("openai#2 (…f3a9)", "gw-4f9a8b7c6d5e4f3a2b1c")
	cases := []struct{ in, want string }{
		{"invalid key " + key + " given", "invalid key [redacted] given"},
		{"auth " + "gw-4f9a8b7c6d5e4f3a2b1c", "auth openai#2 (…f3a9)"},
		{"NOAUTH hunter2-redis-password", "NOAUTH [redacted]"},
		// a cut left the key's start at the end, or its end at the start
		{"body: ..." + key[:22], "body: ...[redacted]"},
		{key[30:] + " was echoed", "[redacted] was echoed"},
		// key-shaped tokens nobody configured
		{"Incorrect API key provided: sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA.", "Incorrect API key provided: sk-[redacted]."},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc", "Authorization: Bearer [redacted]"},
		// words that look a little like keys stay
		{"a risk-free task-1234 in desk-organizer-deluxe-edition-2024", "a risk-free task-1234 in desk-organizer-deluxe-edition-2024"},
		{"Bearer authentication required", "Bearer authentication required"},
		{"", ""},
	}
	for _, c := range cases {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	var nilR *redact.Redactor
	if got := nilR.String("x sk-AAAAAAAAAAAAAAAAAAAAAAAAAA"); got != "x sk-[redacted]" {
		t.Errorf("nil redactor: %q", got)
	}
	if got := redact.New("ab").String("ab cab"); got != "ab cab" {
		t.Errorf("a 2-byte secret redacted ordinary text: %q", got)
	}
}

// A key that straddles the cut leaves nothing of itself, whichever byte the
// cut falls on (the defect: cutting at 512 bytes first leaked the key's
// first 22 characters).
func TestTruncateAcrossAKey(t *testing.T) {
	r := redact.New(key)
	for pre := 0; pre < 80; pre++ {
		s := strings.Repeat("é", pre/2) + strings.Repeat("x", pre%2) + key + " tail"
		for n := 0; n < len(s)+2; n++ {
			got := r.Truncate(s, n)
			if leaks(got, key) {
				t.Fatalf("Truncate(pre %d, n %d) = %q leaks the key", pre, n, got)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("Truncate(pre %d, n %d) = %q is not UTF-8", pre, n, got)
			}
			if len(strings.TrimSuffix(got, "…")) > max(n, len("[redacted]")+len(s)) {
				t.Fatalf("Truncate(n %d) = %d bytes", n, len(got))
			}
		}
	}
}

// leaks reports whether text holds 8 or more consecutive bytes of secret.
func leaks(text, secret string) bool {
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+8]) {
			return true
		}
	}
	return false
}

// FuzzRedact builds bodies around configured keys (echoed whole, or with
// one end cut off where the body itself was cut, inside JSON, HTML and
// text/plain, next to multibyte text) and checks that no 8-byte piece of a
// key survives String or Truncate.
func FuzzRedact(f *testing.F) {
	f.Add("invalid api key: ", " (401)", uint8(0), uint16(512), uint8(0))
	f.Add(`{"error":{"message":"key `, `"}}`, uint8(1), uint16(30), uint8(9))
	f.Add("<html><body>Unauthorized ", "</body></html>", uint8(2), uint16(40), uint8(12))
	f.Add("ééé", "ü", uint8(0), uint16(7), uint8(20))
	keys := []string{key, "sk-ant-api03-ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ", "redis-pass-0987654321"}
	r := redact.New(keys...)
	f.Fuzz(func(t *testing.T, before, after string, which uint8, cut uint16, drop uint8) {
		k := keys[int(which)%len(keys)]
		d := int(drop) % (len(k) - 8)
		bodies := []string{
			before + k + after,    // echoed whole
			before + k[:len(k)-d], // the body was cut inside the key
			k[d:] + after,         // the body is a window that starts inside it
		}
		for _, body := range bodies {
			for _, got := range []string{r.String(body), r.Truncate(body, int(cut))} {
				// the key counts as leaked only where the fuzzer's own text
				// did not supply the bytes
				if leaks(got, k) && !leaks(before+after, k) {
					t.Fatalf("%q leaks key %d: %q", body, which, got)
				}
				if utf8.ValidString(body) && !utf8.ValidString(got) {
					t.Fatalf("%q became invalid UTF-8: %q", body, got)
				}
			}
		}
	})
}
