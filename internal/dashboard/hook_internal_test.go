package dashboard

import "testing"

// The spec the API serves keeps a webhook's scheme and host only: its
// path and query are often what lets anyone post to it.
func TestHookOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXXSECRET": "https://hooks.slack.com/…",
		"https://user:pw@example.com:8443/hook?token=abc":       "https://example.com:8443/…",
		"not a url": "…",
		"%zz":       "…",
		"":          "…",
	} {
		if got := hookOrigin(in); got != want {
			t.Errorf("hookOrigin(%q) = %q, want %q", in, got, want)
		}
	}
}
