package deploy

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agentq/agentq/internal/config"
)

// A worker's args by default depend on its image: the agentq image gets
// its worker subcommand, another image (a worker built with the SDK) its
// entrypoint as built, with no args; args given are passed as given.
func TestChartWorkerArgsFollowTheImage(t *testing.T) {
	stock := []string{"worker", "--wait-for-redis=2m"}
	custom := with(t, nil, "worker.image.repository", "registry.example.com/my-worker")
	for _, tc := range []struct {
		name    string
		values  map[string]any
		command []string
		args    []string
	}{
		{"default values", nil, nil, stock},
		{"the agentq image from another registry", with(t, nil, "image.repository", "mirror.example.com/agentq"), nil, stock},
		{"worker.image naming the top-level repository", with(t, nil, "worker.image.repository", "agentq"), nil, stock},
		{"a custom image", custom, nil, nil},
		{"a custom image with args", with(t, custom, "worker.args", []any{"--verbose"}), nil, []string{"--verbose"}},
		{"the agentq image with a command", with(t, nil, "worker.command", []any{"/usr/local/bin/worker"}), []string{"/usr/local/bin/worker"}, nil},
	} {
		c := containers(t, render(t, tc.values))["prod-agentq-worker"]
		if !slices.Equal(c.Command, tc.command) || !slices.Equal(c.Args, tc.args) {
			t.Errorf("%s: command %q args %q, want %q %q", tc.name, c.Command, c.Args, tc.command, tc.args)
		}
	}
}

// GOMEMLIMIT is 90% of the container's memory limit, in bytes, for the
// worker and the dashboard; none without a limit; the component's own
// env wins; a limit the chart cannot read is refused, naming it.
func TestChartGoMemLimit(t *testing.T) {
	dash := with(t, with(t, nil, "dashboard.enabled", true), "dashboard.tokenSecret.name", "tok")
	for _, limit := range []any{"512Mi", "1.5Gi", "1G", "750M", "1000000k", "2Ti", 1073741824, "123456789"} {
		v := with(t, with(t, dash, "worker.resources", map[string]any{"limits": map[string]any{"memory": limit}}),
			"dashboard.resources", map[string]any{"limits": map[string]any{"memory": limit}, "requests": map[string]any{"memory": "64Mi"}})
		q := resource.MustParse(strings.TrimSpace(toYAMLScalar(limit)))
		want := strings.TrimSpace(strings.Repeat(" ", 0) + itoa(q.Value()*9/10))
		for name, c := range containers(t, render(t, v)) {
			var got []string
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					got = append(got, e.Value)
				}
			}
			if !slices.Equal(got, []string{want}) {
				t.Errorf("%s with a %v limit: GOMEMLIMIT %v, want %s", name, limit, got, want)
			}
		}
	}
	for name, c := range containers(t, render(t, dash)) {
		for _, e := range c.Env {
			if e.Name == "GOMEMLIMIT" {
				t.Errorf("%s without a memory limit: GOMEMLIMIT %s", name, e.Value)
			}
		}
	}
	own := with(t, with(t, nil, "worker.resources", map[string]any{"limits": map[string]any{"memory": "1Gi"}}),
		"worker.env", []any{map[string]any{"name": "GOMEMLIMIT", "value": "700MiB"}})
	var got []string
	for _, e := range containers(t, render(t, own))["prod-agentq-worker"].Env {
		if e.Name == "GOMEMLIMIT" {
			got = append(got, e.Value)
		}
	}
	if !slices.Equal(got, []string{"700MiB"}) {
		t.Errorf("worker.env's GOMEMLIMIT: the container has %v", got)
	}
	msg := renderRefused(t, with(t, nil, "worker.resources", map[string]any{"limits": map[string]any{"memory": "1e9"}}))
	if !strings.Contains(msg, `templates/worker.yaml: worker.resources.limits.memory "1e9" is not a quantity`) {
		t.Errorf("refusal %q", msg)
	}
}

func toYAMLScalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return itoa(int64(v.(int)))
}

func itoa(n int64) string { return strconvFormat(n) }

// The helm commands docs/deploy.md shows render, with their --set,
// --set-string and --set-json values parsed by helm's own parser (a tag
// of digits is a number); the SDK worker's runs its image with no args.
func TestDocsHelmCommands(t *testing.T) {
	cmds := docHelmCommands(t)
	if len(cmds) < 2 {
		t.Fatalf("docs/deploy.md shows %d helm commands", len(cmds))
	}
	sdk := false
	for _, cmd := range cmds {
		values := map[string]any{}
		words := shellWords(cmd)
		for i := 0; i < len(words); i++ {
			var err error
			switch words[i] {
			case "--set":
				i++
				err = strvals.ParseInto(words[i], values)
			case "--set-string":
				i++
				err = strvals.ParseIntoString(words[i], values)
			case "--set-json":
				i++
				err = strvals.ParseJSON(words[i], values)
			case "-f", "--values":
				t.Errorf("%s: values files are not checked here", cmd)
			}
			if err != nil {
				t.Fatalf("%s: %v", cmd, err)
			}
		}
		files, err := renderErr(values)
		if err != nil {
			t.Errorf("docs/deploy.md: %s: %v", cmd, err)
			continue
		}
		decode(t, files)
		if strings.Contains(cmd, "worker.image.repository") {
			sdk = true
			c := containers(t, files)["prod-agentq-worker"]
			if c.Image != "registry.example.com/my-worker:1" || len(c.Command) != 0 || len(c.Args) != 0 {
				t.Errorf("%s: worker runs %s %q %q, want the image's entrypoint", cmd, c.Image, c.Command, c.Args)
			}
		}
	}
	if !sdk {
		t.Error("docs/deploy.md shows no helm command for a worker built with the SDK")
	}
}

// docHelmCommands are the helm commands in docs/deploy.md's sh blocks,
// continuation lines joined.
func docHelmCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "```"):
			in = l == "```sh"
			continue
		case !in:
			continue
		}
		if cur != "" || strings.HasPrefix(l, "helm ") {
			cur += strings.TrimSuffix(l, "\\") + " "
			if !strings.HasSuffix(l, "\\") {
				out = append(out, strings.TrimSpace(cur))
				cur = ""
			}
		}
	}
	return out
}

// shellWords splits a command as sh would for the quoting docs use ('…'
// and "…").
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quote, inWord := rune(0), false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// docs/deploy.md's config row names exactly agentq.yaml's top-level keys
// but redis (as the schema allows them), and the worker keys the chart
// writes or passes are the ones the templates refuse in config and real
// keys of agentq.yaml's worker section.
func TestDocsChartConfigKeys(t *testing.T) {
	data, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `config` \\|.*$").FindString(string(data))
	allowed, rest, ok := strings.Cut(row, "(no other key")
	if !ok {
		t.Fatalf("docs/deploy.md's config row %q", row)
	}
	_, allowed, _ = strings.Cut(allowed, "but `redis`:")
	tick := regexp.MustCompile("`([a-z_.]+)`")
	var got []string
	for _, m := range tick.FindAllStringSubmatch(allowed, -1) {
		got = append(got, m[1])
	}
	var want []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[config.Config]()) {
		if tag := strings.Split(f.Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" && tag != "redis" {
			want = append(want, tag)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("docs/deploy.md's config row names %v, agentq.yaml has %v (without redis)", got, want)
	}
	// the worker keys the chart sets
	var set []string
	for _, m := range tick.FindAllStringSubmatch(rest, -1) {
		if k, ok := strings.CutPrefix(m[1], "worker."); ok && strings.Contains(k, "_") || k == "concurrency" || k == "queues" {
			if ok {
				set = append(set, k)
			}
		}
	}
	set = slices.Compact(slices.Sorted(slices.Values(set)))
	helpers, err := os.ReadFile(chartDir + "/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	refused := regexp.MustCompile(`range list ((?:"[a-z_]+" ?)+) -}}`).FindStringSubmatch(string(helpers))
	var inTpl []string
	if refused != nil {
		for _, q := range strings.Fields(refused[1]) {
			inTpl = append(inTpl, strings.Trim(q, `"`))
		}
	}
	sort.Strings(inTpl)
	if !slices.Equal(set, inTpl) {
		t.Errorf("docs/deploy.md says the chart sets worker.%v, the templates refuse worker.%v in config", set, inTpl)
	}
	var workerKeys []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[config.Worker]()) {
		workerKeys = append(workerKeys, strings.Split(f.Tag.Get("yaml"), ",")[0])
	}
	for _, k := range set {
		if !slices.Contains(workerKeys, k) {
			t.Errorf("docs/deploy.md: worker.%s is not a key of agentq.yaml's worker section", k)
		}
	}
	// and what the chart writes: concurrency, metrics_addr, shutdown_timeout
	cm := configMap(t, render(t, nil))["agentq.yaml"]
	for _, k := range set {
		if k != "queues" && !regexp.MustCompile(`(?m)^  `+k+`: `).MatchString(cm) {
			t.Errorf("the chart's agentq.yaml has no worker.%s:\n%s", k, cm)
		}
	}
}

func strconvFormat(n int64) string { return strconv.FormatInt(n, 10) }
