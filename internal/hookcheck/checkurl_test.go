package hookcheck_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/hookcheck"
)

// A webhook URL is http(s) with a host that is a name or an address, no
// user info, and not the API's redacted form of one (its path hidden);
// a refusal never repeats a path or a query, where a hook's token lives.
func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"https://hooks.example.com/services/T0/B0/XYZ", "http://10.0.0.7:8080/hook?token=t", "https://[2001:db8::1]/h",
		"https://bücher.example/h", "https://my_host.internal/h", "https://hooks.example.com/…?x=1"} {
		if err := hookcheck.CheckURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for in, want := range map[string]string{
		"https://hooks.example.com;SEMISECRET/x": "the host is not a name or an address",
		"https://hooks.example.com/…":            "as the API shows it",
		"https://user:pw@hooks.example.com/x":    "user info",
		"ftp://hooks.example.com/x":              "not an http(s) URL",
		"https:///x":                             "has no host",
	} {
		err := hookcheck.CheckURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "SEMISECRET") || strings.Contains(err.Error(), "pw@")) {
			t.Errorf("%s: the refusal repeats the URL's secret: %v", in, err)
		}
	}
}

// An allow entry is a host name, an IP or *.suffix, held normalized; the
// events are the five end states; a secret is 16 bytes or more, raw or
// whsec_ and base64, and a refusal never repeats it.
func TestAllowEventsAndSecret(t *testing.T) {
	for in, want := range map[string]string{"Hooks.Example.COM.": "hooks.example.com", "[::ffff:10.0.0.1]": "10.0.0.1", "*.example.com": "*.example.com"} {
		if got, err := hookcheck.AllowEntry(in); err != nil || got != want {
			t.Errorf("AllowEntry(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "*", "https://x.example", "x.example:443", "a..b", "*.*.b"} {
		if err := hookcheck.CheckAllow(bad); err == nil {
			t.Errorf("CheckAllow(%q) passed", bad)
		}
	}
	if i, ev := hookcheck.CheckEvents([]string{"completed", "done"}); i != 1 || ev != "done" {
		t.Errorf("CheckEvents: %d %q, want 1 done", i, ev)
	}
	if i, _ := hookcheck.CheckEvents(hookcheck.Events); i != -1 || hookcheck.EventsHelp() != "completed, blocked, failed, timed_out, canceled" {
		t.Errorf("the events: %d, %s", i, hookcheck.EventsHelp())
	}
	for secret, want := range map[string]string{"short-secret": "under 16", "whsec_!!!s3cr3t": "not valid base64"} {
		_, err := hookcheck.ParseSecret(secret)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "short-secret") {
			t.Errorf("ParseSecret(%q): %v, want %q without the secret", secret, err, want)
		}
	}
	if k, err := hookcheck.ParseSecret("sixteen bytes!!!"); err != nil || len(k) != 16 {
		t.Errorf("a raw 16-byte secret: %v", err)
	}
}
