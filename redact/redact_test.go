package redact_test

import (
	"encoding/base64"
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
		split := int(cut) % len(k)
		bodies := []string{
			before + k + after,    // echoed whole
			before + k[:len(k)-d], // the body was cut inside the key
			k[d:] + after,         // the body is a window that starts inside it
			before + k[:split] + " " + before + k[split:] + after,                    // echoed in two pieces
			before + base64.StdEncoding.EncodeToString([]byte(before+":"+k)) + after, // Basic auth echoed
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

// A key echoed in pieces (split in two at every position, with text
// between), a character of it changed, or base64-encoded (alone, as
// "Basic base64(user:key)" whatever the user's length, in the standard
// and URL alphabets) leaves no run of 8 of its characters, and no run of
// 8 of its base64 form; text that merely shares a few characters stays.
func TestPiecesOfASecretAreRemovedWhereverTheyStand(t *testing.T) {
	keys := []string{"sk-fakeSecretTwo-QrStUvWxYz0123456789", "hunter2-redis-password"}
	r := redact.New(keys...)
	for _, k := range keys {
		for split := 1; split < len(k); split++ {
			in := "key " + k[:split] + " and " + k[split:] + " echoed"
			got := r.String(in)
			for _, piece := range []string{k[:split], k[split:]} {
				if len(piece) >= 8 && leaks(got, piece) {
					t.Fatalf("split at %d: %q leaks %q", split, got, piece)
				}
			}
			if !strings.HasPrefix(got, "key ") || !strings.HasSuffix(got, " echoed") {
				t.Fatalf("split at %d: the text around the key was lost: %q", split, got)
			}
		}
		changed := []byte(k)
		changed[len(k)/2] ^= 1
		if got := r.String(string(changed)); leaks(got, k) {
			t.Fatalf("a key with one character changed: %q", got)
		}
		if got := r.String("bad key [" + strings.ToUpper(k) + "]"); leaks(strings.ToLower(got), k) {
			t.Fatalf("a key echoed upper-cased: %q", got)
		}
		for user := range 5 {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
				plain := strings.Repeat("u", user) + ":" + k
				b64 := enc.EncodeToString([]byte(plain))
				got := r.String("401: Authorization: Basic " + b64 + " refused")
				if strings.Contains(got, b64[len(b64)/2-4:len(b64)/2+4]) {
					t.Fatalf("user %d: %q leaks the middle of %q", user, got, b64)
				}
				if got := r.String(enc.EncodeToString([]byte(k))); len(got) > 0 && strings.Contains(got, enc.EncodeToString([]byte(k))[4:12]) {
					t.Fatalf("base64 of the key alone: %q", got)
				}
			}
		}
	}
	// (a run of 8 is removed even where it is a word: "password" of
	// "hunter2-redis-password" in "passwords" would be)
	for _, ok := range []string{"the secret of redis is speed", "a pass word", "sk-fake secrets"} {
		if got := r.String(ok); got != ok {
			t.Errorf("ordinary text %q became %q", ok, got)
		}
	}
}

// BenchmarkString redacts a log line and a 4 KiB error body with ten
// configured secrets (whole-value, piece and base64 lookups, edges, shapes).
func BenchmarkString(b *testing.B) {
	var keys []string
	for i := range 10 {
		keys = append(keys, "sk-bench-"+strings.Repeat(string(rune('a'+i)), 40))
	}
	r := redact.New(keys...)
	line := `{"time":"2026-12-02T06:00:00Z","level":"INFO","msg":"llm_call","route":"main","provider":"oa","model":"m-oa","class":"ok","dur":"1.2s"}`
	body := strings.Repeat(`{"error":{"message":"upstream overloaded, try again later","type":"server_error"}} `, 50)
	for _, c := range []struct{ name, s string }{{"line", line}, {"body4k", body}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				r.String(c.s)
			}
		})
	}
}

// A secret that is not UTF-8 (a webhook secret's decoded bytes) is removed
// like any other, without a panic, whatever text it is found in (found by
// review: runs widened to whole runes overlapped and cut the text wrongly).
func TestPiecesOfABinarySecret(t *testing.T) {
	sec := "aaaxaa€\x80b\x80aпa"
	r := redact.New(sec)
	for _, txt := range []string{sec, "x" + sec + "y", sec[:9] + "€" + sec[3:], "€€" + sec[2:] + sec[:12]} {
		got := r.String(txt)
		if leaks(got, sec) {
			t.Errorf("String(%q) = %q leaks the secret", txt, got)
		}
	}
}

// FuzzRedactAnySecret: whatever the secret's bytes and the text, String
// and Truncate do not panic, keep valid UTF-8 valid, and leave no run of 8
// of the secret's bytes the text did not need to hold itself.
func FuzzRedactAnySecret(f *testing.F) {
	f.Add("aaaxaa€\x80b\x80aпa", "aaaxaa€\x80b\x80aпa tail")
	f.Add("sk-fakeSecretTwo-QrStUvWxYz", "key sk-fakeSecretTwo-Q rStUvWxYz echoed")
	f.Add("XAA\xe2", "XAA€")                     // a secret ending inside a rune of the text (found by CI's fuzzing)
	f.Add("\x82\xacbcdefg", "€bcdefg and more")  // one starting inside a rune, at the text's start
	f.Add("abcdef\xe2\x82", "text ends abcdef€") // a piece of one at the text's end
	f.Fuzz(func(t *testing.T, secret, text string) {
		r := redact.New(secret)
		got := r.String(text)
		_ = r.Truncate(text, len(text)/2)
		if utf8.ValidString(text) && !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q is not UTF-8", text, got)
		}
		if len(secret) >= 8 && strings.Contains(got, secret) && !strings.Contains(redact.Mask, secret) {
			t.Fatalf("String(%q) = %q holds the whole secret %q", text, got, secret)
		}
	})
}
