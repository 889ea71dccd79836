// Package deploy holds deployment files; its tests check them without a
// Docker engine: the compose file's shape, that every file it mounts
// exists, that agentq and chaosllm accept the configuration and scenario it
// mounts, and the Dockerfile's promises (static, non-root, every binary).
package deploy

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
)

type service struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck map[string]any    `yaml:"healthcheck"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
}

// composeServices reads docker-compose.yml (YAML merge keys resolved, as
// compose does).
func composeServices(t *testing.T) map[string]service {
	t.Helper()
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
	return c.Services
}

// interpolate is compose's ${VAR:-default} with VAR unset.
func interpolate(s string) string {
	return regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(:?-([^}]*))?\}`).ReplaceAllString(s, "$2")
}

func TestComposeFile(t *testing.T) {
	c := struct{ Services map[string]service }{composeServices(t)}
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
		if e := c.Services[w].Environment; e["AGENTQ_CONFIG"] == "" || e["AGENTQ_REDIS_ADDR"] != "redis:6379" || e["AGENTQ_DASHBOARD_TOKEN"] != "" {
			t.Errorf("%s environment %v", w, e)
		}
	}
	// the dashboard: a development token (overridable), so it listens on
	// all interfaces and the port mapping reaches it; the Host check
	// accepts the names it is reached by
	d := c.Services["dashboard"]
	if tok := d.Environment["AGENTQ_DASHBOARD_TOKEN"]; !strings.HasPrefix(tok, "${AGENTQ_DASHBOARD_TOKEN:-") || interpolate(tok) == "" {
		t.Errorf("dashboard token %q: want ${AGENTQ_DASHBOARD_TOKEN:-a default}", tok)
	}
	if d.Environment["AGENTQ_CONFIG"] == "" || d.Environment["AGENTQ_REDIS_ADDR"] != "redis:6379" {
		t.Errorf("dashboard environment %v lacks the shared configuration", d.Environment)
	}
	cmd := strings.Join(d.Command, " ")
	if !strings.HasPrefix(cmd, "dashboard --addr :8080 ") || len(d.Ports) != 1 || d.Ports[0] != "8080:8080" {
		t.Errorf("dashboard runs %q with ports %v", cmd, d.Ports)
	}
	for _, h := range []string{"localhost:8080", "127.0.0.1:8080", "dashboard:8080"} {
		if !regexp.MustCompile(`--allowed-hosts \S*\b` + regexp.QuoteMeta(h) + `\b`).MatchString(cmd) {
			t.Errorf("dashboard runs %q: --allowed-hosts lacks %s", cmd, h)
		}
	}
}

// The compose dashboard works as written: its command and environment
// (the token's default) make it listen on all interfaces, so the port
// mapping reaches it, and it answers localhost:8080 and dashboard:8080
// with the token. (Port 8080 is replaced by a free one, on both sides of
// the mapping, so the names keep their meaning.)
func TestComposeDashboardServes(t *testing.T) {
	d := composeServices(t)["dashboard"]
	mr := miniredis.RunT(t)
	port := strconv.Itoa(freePort(t))
	env := map[string]string{}
	for k, v := range d.Environment {
		env[k] = interpolate(v)
	}
	env["AGENTQ_CONFIG"] = "compose/agentq.yaml"
	env["AGENTQ_REDIS_ADDR"] = mr.Addr()
	var args []string
	for _, a := range d.Command[1:] {
		args = append(args, strings.ReplaceAll(a, "8080", port))
	}
	addr, stderr := serveDashboard(t, args, env)
	if strings.Contains(stderr.String(), "loopback") || strings.HasPrefix(addr, "127.") {
		t.Fatalf("the dashboard listens on loopback only (%s), out of the port mapping's reach: %s", addr, stderr)
	}
	p, _ := strconv.Atoi(port)
	tok := env["AGENTQ_DASHBOARD_TOKEN"]
	for _, tc := range []struct {
		host, token string
		want        int
	}{
		{"localhost:" + port, "", 401}, {"localhost:" + port, tok, 200}, {"127.0.0.1:" + port, tok, 200},
		{"dashboard:" + port, tok, 200}, {"evil.example:" + port, tok, http.StatusMisdirectedRequest},
	} {
		if got := status(t, p, tc.host, "/api/v1/workflows", tc.token); got != tc.want {
			t.Errorf("Host %s (token %q): %d, want %d", tc.host, tc.token, got, tc.want)
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
