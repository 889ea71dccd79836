package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

const whSecret = "whsec_dGVzdCBzaWduaW5nIGtleSwgMzIgYnl0ZXMgbG9uZyE="

func TestWebhooksConfig(t *testing.T) {
	vars := map[string]string{"OA_KEY": "k", "AN_KEY": "k", "HOOK_SECRET": whSecret}
	c, err := config.Load(config.Input{Path: write(t, good+`
webhooks:
  secret: ${HOOK_SECRET}
  allow: [hooks.example.com, "*.example.org", 127.0.0.1]
  url: https://hooks.example.com/agentq?token=t
  events: [failed, timed_out]
`), LookupEnv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhooks
	if w.Secret.Reveal() != whSecret || len(w.Allow) != 3 || w.URL == "" || len(w.Events) != 2 || !w.Enabled() {
		t.Fatalf("webhooks = %+v", w)
	}
	if !slices.Contains(c.Secrets(), whSecret) {
		t.Error("Secrets() leaves the webhook secret out: the redactor would not remove it")
	}
	if s := sprintf("%v %+v", c, w); strings.Contains(s, whSecret) {
		t.Error("the webhook secret prints")
	}
	if (config.Webhooks{}).Enabled() {
		t.Error("the zero value is enabled")
	}
}

func TestWebhooksConfigProblems(t *testing.T) {
	base := map[string]string{"OA_KEY": "k", "AN_KEY": "k"}
	for name, c := range map[string]struct{ block, want string }{
		"bad url":        {"secret: " + whSecret + "\n  url: ftp://x", `webhooks.url: "ftp://x" is not an http(s) URL`},
		"unknown event":  {"secret: " + whSecret + "\n  events: [completed, finished]", `webhooks.events[1]: unknown event "finished"`},
		"url, no secret": {"url: https://x.example/", "webhooks.secret: is empty (webhooks.url needs a secret"},
		"bad allow":      {"secret: " + whSecret + "\n  allow: [\"https://x.example\"]", "webhooks.allow[0]"},
		"short secret":   {"secret: short", "webhooks.secret: the secret is 5 bytes, under 16"},
		"bad base64":     {"secret: whsec_%%%", "webhooks.secret: a whsec_ secret is not valid base64"},
	} {
		_, err := config.Load(config.Input{Path: write(t, good+"\nwebhooks:\n  "+c.block+"\n"), LookupEnv: env(base)})
		lines := problem.Lines(err)
		if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s: %q, want one problem saying %q", name, lines, c.want)
		}
	}
}
