package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

const good = `
redis:
  addr: 127.0.0.1:6390
providers:
  - name: openai
    kind: openai
    base_url: http://127.0.0.1:8081/v1
    keys: ["${OA_KEY}", "${OA_KEY_2:-backup-key}"]
    timeout: 20s
  - name: anthropic
    kind: anthropic
    keys: ["${AN_KEY}"]
routes:
  report:
    targets:
      - { provider: anthropic, model: claude-sonnet-4-5 }
      - { provider: openai, model: gpt-4.1 }
    fallback_text: "later"
worker:
  concurrency: ${CONC:-20}
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentq.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadGood(t *testing.T) {
	p := write(t, good)
	c, err := config.Load(config.Input{Path: p, LookupEnv: env(map[string]string{"OA_KEY": "sk-1", "AN_KEY": "sk-a", "AGENTQ_QUEUES": "a=2,b=1"}),
		Flags: map[string]string{"worker.concurrency": "7"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers[0].Keys; len(got) != 2 || got[0].Reveal() != "sk-1" || got[1].Reveal() != "backup-key" {
		t.Errorf("keys = %v", got)
	}
	if c.Providers[0].Timeout.D() != 20*time.Second || c.Providers[1].Timeout.D() != 60*time.Second {
		t.Errorf("timeouts = %s %s", c.Providers[0].Timeout, c.Providers[1].Timeout)
	}
	if c.Worker.Concurrency != 7 {
		t.Errorf("flag did not win: concurrency = %d", c.Worker.Concurrency)
	}
	if config.FormatQueues(c.Worker.Queues) != "a=2,b=1" {
		t.Errorf("env did not set queues: %v", c.Worker.Queues)
	}
	if r := c.Routes["report"]; r.Strategy != "health" || r.HedgeAfter != "off" {
		t.Errorf("route defaults = %+v", r)
	}
	if *c.Resilience.Retry.MaxRetries != 12 || c.Retention.D() != 24*time.Hour {
		t.Errorf("defaults not applied: %+v", c.Resilience.Retry)
	}
}

func TestSecretsDoNotPrint(t *testing.T) {
	c, err := config.Load(config.Input{Path: write(t, good), LookupEnv: env(map[string]string{"OA_KEY": "sk-visible", "AN_KEY": "sk-a"})})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		strings.Join([]string{c.Providers[0].Keys[0].String()}, ""),
		sprintf("%v %+v %#v %s", c, c, c, c.Providers[0].Keys),
	} {
		if strings.Contains(s, "sk-visible") {
			t.Errorf("secret printed: %s", s)
		}
	}
}

func TestBadInputs(t *testing.T) {
	base := map[string]string{"OA_KEY": "k", "AN_KEY": "k"}
	cases := []struct {
		name, yaml string
		env        map[string]string
		want       []string // substrings of the single problem line
	}{
		{"unknown field", strings.Replace(good, "timeout: 20s", "timeout: 20s\n    tmeout: 3s", 1), base, []string{"agentq.yaml:10", `unknown field "tmeout"`}},
		{"unknown provider", strings.Replace(good, "provider: openai,", "provider: opneai,", 1), base, []string{"routes.report.targets[1].provider", `unknown provider "opneai"`}},
		{"missing env var", good, map[string]string{"OA_KEY": "k"}, []string{"agentq.yaml:12", "environment variable AN_KEY is not set"}},
		{"bad duration", strings.Replace(good, "20s", "20 seconds", 1), base, []string{"agentq.yaml:9", `bad duration "20 seconds"`}},
		{"sub-second timeout", strings.Replace(good, "20s", "500ms", 1), base, []string{"providers[0].timeout", "under 1s"}},
		{"bad kind", strings.Replace(good, "kind: anthropic", "kind: gemini", 1), base, []string{"providers[1].kind", `"gemini"`}},
		{"duplicate provider", strings.Replace(good, "routes:", "  - { name: openai, kind: openai }\nroutes:", 1), base, []string{"providers[2].name", "used by another"}},
		{"not a number", good, map[string]string{"OA_KEY": "k", "AN_KEY": "k", "CONC": "many"}, []string{"agentq.yaml:20", `"many" is not a whole number`}},
		{"bad yaml", "redis: [", base, []string{"agentq.yaml"}},
		{"missing ca_file", strings.Replace(good, "timeout: 20s", "timeout: 20s\n    ca_file: /nonexistent/ca.pem", 1), base, []string{"providers[0].ca_file", "/nonexistent/ca.pem", "no such file"}},
		{"ca_file without a certificate", strings.Replace(good, "timeout: 20s", "timeout: 20s\n    ca_file: config_test.go", 1), base, []string{"providers[0].ca_file", "config_test.go holds no PEM certificate"}},
		{"profiling without a metrics address", strings.Replace(good, "worker:\n", "worker:\n  profiling: true\n", 1), base, []string{"worker.profiling", "needs worker.metrics_addr"}},
		{"bad env override", good, map[string]string{"OA_KEY": "k", "AN_KEY": "k", "AGENTQ_CONCURRENCY": "x"}, []string{"AGENTQ_CONCURRENCY", "worker.concurrency", "not a whole number"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load(config.Input{Path: write(t, c.yaml), LookupEnv: env(c.env)})
			if err == nil {
				t.Fatal("no error")
			}
			lines := problem.Lines(err)
			if len(lines) != 1 {
				t.Fatalf("want one problem, got %d: %q", len(lines), lines)
			}
			for _, w := range c.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("%q does not mention %q", lines[0], w)
				}
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	if _, err := config.Load(config.Input{Path: "/nonexistent/agentq.yaml"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/agentq.yaml") {
		t.Errorf("explicit missing file: %v", err)
	}
	c, err := config.Load(config.Input{Path: "/nonexistent/agentq.yaml", Optional: true, LookupEnv: env(nil)})
	if err != nil || c.Redis.Addr != "127.0.0.1:6379" {
		t.Errorf("optional missing file: %v %+v", err, c.Redis)
	}
}

func TestParseQueues(t *testing.T) {
	q, err := config.ParseQueues("critical=6, default=3,low")
	if err != nil || q["critical"] != 6 || q["default"] != 3 || q["low"] != 1 {
		t.Fatalf("%v %v", q, err)
	}
	for _, bad := range []string{"", "a=0", "=3", "a=x"} {
		if _, err := config.ParseQueues(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Keys can come from files (secrets mounted by Kubernetes or Docker); a
// missing file is one line naming it.
func TestKeysFromFiles(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "openai-key")
	if err := os.WriteFile(keyFile, []byte("sk-from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(good, "${OA_KEY}", "${file:"+keyFile+"}", 1)
	c, err := config.Load(config.Input{Path: write(t, y), LookupEnv: env(map[string]string{"AN_KEY": "sk-a"})})
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Providers[0].Keys[0].Reveal(); k != "sk-from-a-file" {
		t.Fatalf("key = %q", k)
	}
	_, err = config.Load(config.Input{Path: write(t, strings.Replace(y, keyFile, "/nonexistent/key", 1)), LookupEnv: env(map[string]string{"AN_KEY": "sk-a"})})
	if err == nil || !strings.Contains(err.Error(), "${file:/nonexistent/key}: open /nonexistent/key: no such file or directory") {
		t.Fatalf("err = %v", err)
	}
}
