package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The way from the SDK to a cluster, as docs/deploy.md walks it: the
// example worker's Dockerfile is a static, non-root, multi-stage build of
// examples/sdk-worker; the compose override runs that image in place of
// both stock workers; and the chart, given its image and command, renders
// a worker Deployment that runs exactly that, with the configuration, the
// queues and Redis in its environment.
func TestSDKWorkerDeployPath(t *testing.T) {
	data, err := os.ReadFile("../examples/sdk-worker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := string(data)
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(d, -1)); n < 2 {
		t.Errorf("the SDK worker's Dockerfile has %d stages, want a multi-stage build", n)
	}
	for _, want := range []string{"CGO_ENABLED=0", "USER 65532", "./examples/sdk-worker", `ENTRYPOINT ["/usr/local/bin/worker"]`} {
		if !strings.Contains(d, want) {
			t.Errorf("the SDK worker's Dockerfile lacks %q", want)
		}
	}

	// compose: the override's workers build that Dockerfile and run its entrypoint
	over, err := os.ReadFile("../examples/sdk-worker/compose.override.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Services map[string]struct {
			Build struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(over, &o); err != nil {
		t.Fatal(err)
	}
	base := composeServices(t)
	for _, w := range []string{"worker-1", "worker-2"} {
		s, ok := o.Services[w]
		if _, inBase := base[w]; !ok || !inBase {
			t.Fatalf("the override does not replace %s of docker-compose.yml", w)
		}
		if s.Build.Context != "." || s.Build.Dockerfile != "examples/sdk-worker/Dockerfile" || s.Command == nil || len(s.Command) != 0 {
			t.Errorf("%s: build %+v command %v; want the SDK worker's Dockerfile and its entrypoint", w, s.Build, s.Command)
		}
		if s.Environment["AGENTQ_CONFIG"] == "" || s.Environment["AGENTQ_REDIS_ADDR"] != "redis:6379" {
			t.Errorf("%s environment %v", w, s.Environment)
		}
	}
	for name, s := range o.Services {
		for _, v := range s.Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("the override's %s mounts %s, which does not exist", name, src)
				}
			}
		}
	}

	// helm: worker.image and worker.command are what the worker runs
	values := with(t, with(t, with(t, nil, "worker.image", map[string]any{"repository": "registry.example.com/team/my-worker", "tag": "7"}),
		"worker.command", []any{"/usr/local/bin/worker"}), "worker.env", []any{map[string]any{"name": "TEAM", "value": "search"}})
	cs := containers(t, render(t, values))
	w := cs["prod-agentq-worker"]
	if w.Image != "registry.example.com/team/my-worker:7" || !slices.Equal(w.Command, []string{"/usr/local/bin/worker"}) || len(w.Args) != 0 {
		t.Fatalf("worker container runs %s %v %v; want the SDK worker's image and command, no args", w.Image, w.Command, w.Args)
	}
	env := map[string]string{}
	for _, e := range w.Env {
		env[e.Name] = e.Value
	}
	if env["AGENTQ_CONFIG"] != "/etc/agentq/agentq.yaml" || env["AGENTQ_QUEUES"] != "critical=6,default=3,low=1" || env["TEAM"] != "search" {
		t.Errorf("worker environment %v", env)
	}
	if w.LivenessProbe.HTTPGet.Path != "/livez" || w.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("worker probes %s %s", w.LivenessProbe.HTTPGet.Path, w.ReadinessProbe.HTTPGet.Path)
	}
	// the stock image keeps its own command, and the dashboard the top-level image
	stock := containers(t, render(t, with(t, with(t, nil, "dashboard.enabled", true), "dashboard.tokenSecret.name", "tok")))
	if c := stock["prod-agentq-worker"]; c.Image != "agentq:0.1.0" || !slices.Equal(c.Args, []string{"worker", "--wait-for-redis=2m"}) {
		t.Errorf("stock worker %s %v %v", c.Image, c.Command, c.Args)
	}
	if c := stock["prod-agentq-dashboard"]; c.Image != "agentq:0.1.0" || len(c.Args) == 0 || c.Args[0] != "dashboard" {
		t.Errorf("dashboard %s %v", c.Image, c.Args)
	}
}
