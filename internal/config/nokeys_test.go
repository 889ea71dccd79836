package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/config"
)

// the workers' configuration, whose keys name variables a dashboard's or
// enqueue's environment does not have
const workersYAML = `redis:
  addr: 127.0.0.1:6390
  password: ${REDIS_PW}
providers:
  - { name: oa, kind: openai, keys: ["${UNSET_OPENAI_KEY}", "${file:/nonexistent/key}"] }
  - name: an
    kind: anthropic
    keys: ["${UNSET_ANTHROPIC_KEY}"]
  - { name: local, kind: anthropic }
routes:
  main: { targets: [ { provider: oa, model: m }, { provider: an, model: m2 } ] }
`

// Without provider keys, the keys are neither expanded (an unset variable
// or a missing file there is fine), nor kept, nor required (an anthropic
// provider without any); every other field loads as usual. The worker's
// load of the same file refuses it, naming the variable and its line.
func TestLoadWithoutProviderKeys(t *testing.T) {
	vars := map[string]string{"REDIS_PW": "redis-secret", "UNSET_ANTHROPIC_KEY": "sk-ant-would-be-read"}
	c, err := config.Load(config.Input{Path: "agentq.yaml", Data: []byte(workersYAML), LookupEnv: env(vars), WithoutProviderKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Providers {
		if p.Keys != nil {
			t.Errorf("provider %s holds keys %d", p.Name, len(p.Keys))
		}
	}
	if len(c.Providers) != 3 || c.Redis.Password.Reveal() != "redis-secret" || !slices.Equal(c.RouteNames(), []string{"main"}) {
		t.Errorf("the rest did not load: %+v", c)
	}
	if s := c.Secrets(); !slices.Equal(s, []string{"redis-secret"}) {
		t.Errorf("secrets %d, want the Redis password only", len(s))
	}

	_, err = config.Load(config.Input{Path: "agentq.yaml", Data: []byte(workersYAML), LookupEnv: env(vars)})
	for _, want := range []string{"agentq.yaml:5: environment variable UNSET_OPENAI_KEY is not set", "agentq.yaml:5: ${file:/nonexistent/key}"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("with keys: %v\nwant %q", err, want)
		}
	}
	local := "providers:\n  - { name: local, kind: anthropic }\n"
	if _, err := config.Load(config.Input{Path: "agentq.yaml", Data: []byte(local), LookupEnv: env(nil)}); err == nil ||
		!strings.Contains(err.Error(), "agentq.yaml: providers[0].keys: is empty (anthropic needs at least one key)") {
		t.Errorf("an anthropic provider without keys, with keys: %v", err)
	}
	if _, err := config.Load(config.Input{Path: "agentq.yaml", Data: []byte(local), LookupEnv: env(nil), WithoutProviderKeys: true}); err != nil {
		t.Errorf("an anthropic provider without keys, without keys: %v", err)
	}
}

// An unset variable outside the providers' keys is still an error with
// its file and line, and a bad key field's neighbours are still checked.
func TestLoadWithoutProviderKeysStillChecksTheRest(t *testing.T) {
	_, err := config.Load(config.Input{Path: "agentq.yaml", Data: []byte(workersYAML), LookupEnv: env(nil), WithoutProviderKeys: true})
	if err == nil || !strings.Contains(err.Error(), "agentq.yaml:3: environment variable REDIS_PW is not set") || strings.Contains(err.Error(), "UNSET_") {
		t.Errorf("got %v", err)
	}
	bad := strings.Replace(workersYAML, "kind: anthropic\n    keys", "kind: anthropc\n    keys", 1)
	_, err = config.Load(config.Input{Path: "agentq.yaml", Data: []byte(bad), LookupEnv: env(map[string]string{"REDIS_PW": "x"}), WithoutProviderKeys: true})
	if err == nil || !strings.Contains(err.Error(), `providers[1].kind: "anthropc" is not one of anthropic, openai`) {
		t.Errorf("got %v", err)
	}
	unknown := strings.Replace(workersYAML, "kind: anthropic\n    keys", "kind: anthropic\n    kees: [x]\n    keys", 1)
	_, err = config.Load(config.Input{Path: "agentq.yaml", Data: []byte(unknown), LookupEnv: env(map[string]string{"REDIS_PW": "x"}), WithoutProviderKeys: true})
	if err == nil || !strings.Contains(err.Error(), `agentq.yaml:8: unknown field "kees"`) {
		t.Errorf("got %v", err)
	}
}
