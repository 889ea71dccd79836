// Package deploy holds deployment files; its tests check them without a
// Docker engine: the compose file's shape, that every file it mounts
// exists, that agentq and chaosllm accept the configuration and scenario it
// mounts, and the Dockerfile's promises (static, non-root, every binary).
package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
)

type service struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	Command     []string       `yaml:"command"`
	Volumes     []string       `yaml:"volumes"`
	Healthcheck map[string]any `yaml:"healthcheck"`
}

func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]service `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"redis", "chaosllm", "worker-1", "worker-2", "dashboard", "prometheus", "grafana"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	redis := c.Services["redis"]
	if !strings.Contains(strings.Join(redis.Command, " "), "--appendonly yes") || redis.Healthcheck == nil {
		t.Errorf("redis must run with AOF on and a health check: %+v", redis)
	}
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("service %s mounts %s, which does not exist", name, src)
				}
			}
		}
	}
	for _, w := range []string{"worker-1", "worker-2"} {
		if cmd := strings.Join(c.Services[w].Command, " "); !strings.HasPrefix(cmd, "worker") || !strings.Contains(cmd, "--metrics-addr :9091") {
			t.Errorf("%s runs %q", w, cmd)
		}
	}
}

func TestComposeConfigAndScenarioLoad(t *testing.T) {
	if _, err := config.Load(config.Input{Path: "compose/agentq.yaml", LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
		t.Errorf("compose/agentq.yaml: %v", err)
	}
	data, err := os.ReadFile("compose/scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chaosllm.ParseScenario(data); err != nil {
		t.Errorf("compose/scenario.yaml: %v", err)
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	data, _ = os.ReadFile("prometheus/prometheus.yml")
	if err := yaml.Unmarshal(data, &prom); err != nil || len(prom.RuleFiles) != 1 || len(prom.ScrapeConfigs) != 2 {
		t.Errorf("prometheus.yml: %+v %v", prom, err)
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := string(data)
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(d, -1)); n < 2 {
		t.Errorf("%d stages, want a multi-stage build", n)
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER 65532", "./cmd/worker", "./cmd/enqueue", "./cmd/dashboard", "./cmd/chaosllm"} {
		if !strings.Contains(d, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^USER (root|0)\b`).MatchString(d) {
		t.Error("the image runs as root")
	}
}
