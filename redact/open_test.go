package redact

import "testing"

// Open holds back the end of a text that may begin a secret, a run of
// one, or a key, and nothing of a text that cannot.
func TestOpen(t *testing.T) {
	r := New("changeme-2024-redis")
	for _, c := range []struct {
		r    *Redactor
		text string
		want int
	}{
		{r, "one two ", 0},
		{r, "the password: change", len("change")},
		{r, "the password: CHANGEME-20", len("CHANGEME-20")}, // runs are found in any letter case
		{r, "the password: xme-2024", len("me-2024")},        // a run may start inside the secret
		{r, "then 2024-redi", len("2024-redi")},              // …and be longer than 8: its end waits too
		{r, "", 0},
		// key shapes, whoever they belong to
		{nil, "use s", 1}, {nil, "use sk", 2}, {nil, "use sk-abc123", len("sk-abc123")}, // a key, while it runs on
		{nil, "risk-ax", 0},            // "sk-" inside a word starts no key
		{nil, "x-sk-ax", len("sk-ax")}, // after a hyphen it does
		{nil, "send Bea", len("Bea")},  // a word that begins "Bearer"
		{nil, "send Bearer  tok.en/x", len("Bearer  tok.en/x")},
		{nil, "send BEARER\n", len("BEARER\n")},
		{nil, "one two.", 0},
	} {
		if got := c.r.Open(c.text); got != c.want {
			t.Errorf("Open(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}
