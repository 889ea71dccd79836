package webhook_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/webhook"
)

// A webhook URL is http(s) with a host that is a name or an address, no
// user info, and not the API's redacted form of one (its path hidden);
// a refusal never repeats a path or a query, where a hook's token lives.
func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"https://hooks.example.com/services/T0/B0/XYZ", "http://10.0.0.7:8080/hook?token=t", "https://[2001:db8::1]/h",
		"https://bücher.example/h", "https://my_host.internal/h", "https://hooks.example.com/…?x=1"} {
		if err := webhook.CheckURL(ok); err != nil {
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
		err := webhook.CheckURL(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "SEMISECRET") || strings.Contains(err.Error(), "pw@")) {
			t.Errorf("%s: the refusal repeats the URL's secret: %v", in, err)
		}
	}
}
