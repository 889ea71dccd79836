package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/agentq/agentq/internal/config"
)

const chartDir = "helm/agentq"

func fullValues(t *testing.T) map[string]any {
	t.Helper()
	return valuesFile(t, "values-full.yaml")
}

// valuesFile reads deploy/testdata/name, as `helm template -f` would.
func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// render is `helm template`: the chart's templates with values, checked
// against values.schema.json.
func render(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	out, err := renderErr(values)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// renderErr is render that returns the schema's or a template's refusal.
func renderErr(values map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "prod", Namespace: "agentq", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, vals)
}

// decode checks every rendered manifest: Kubernetes kinds decode strictly
// into the API types (unknown or misspelled fields fail); KEDA's kinds
// decode strictly into the fields of theirs the chart may use (kedaTypes);
// the Prometheus operator's are checked for their apiVersion and spec.
func decode(t *testing.T, files map[string]string) map[string][]any {
	t.Helper()
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	kinds := map[string][]any{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				APIVersion string         `yaml:"apiVersion"`
				Kind       string         `yaml:"kind"`
				Spec       map[string]any `yaml:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			switch head.Kind {
			case "ServiceMonitor", "PrometheusRule":
				if !strings.Contains(head.APIVersion, "/") || len(head.Spec) == 0 {
					t.Errorf("%s: %s without apiVersion or spec", name, head.Kind)
				}
				kinds[head.Kind] = append(kinds[head.Kind], nil)
				continue
			case "ScaledObject", "TriggerAuthentication":
				obj, err := decodeKEDA(head.Kind, doc)
				if err != nil {
					t.Fatalf("%s: %s does not decode strictly: %v\n%s", name, head.Kind, err, doc)
				}
				kinds[head.Kind] = append(kinds[head.Kind], obj)
				continue
			}
			obj, _, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %s does not decode strictly: %v\n%s", name, head.Kind, err, doc)
			}
			kinds[head.Kind] = append(kinds[head.Kind], obj)
		}
	}
	return kinds
}

// testValues are deploy/testdata's values files, each a Redis mode.
var testValues = []string{"values-full.yaml", "values-sentinel.yaml", "values-cluster.yaml", "values-tls.yaml"}

func TestChartLints(t *testing.T) {
	sets := map[string]map[string]any{"default": nil}
	for _, f := range testValues {
		sets[f] = valuesFile(t, f)
	}
	for name, values := range sets {
		l := lint.All(chartDir, values, "agentq", false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (%s values): %s", name, m)
			}
		}
	}
}

func TestChartRendersValidManifests(t *testing.T) {
	def := decode(t, render(t, nil))
	for _, k := range []string{"Deployment", "ConfigMap"} {
		if len(def[k]) == 0 {
			t.Errorf("default values render no %s", k)
		}
	}
	for _, f := range testValues {
		decode(t, render(t, valuesFile(t, f)))
	}
	full := decode(t, render(t, fullValues(t)))
	for _, k := range []string{"Deployment", "Service", "ConfigMap", "Ingress", "ServiceMonitor", "PrometheusRule", "ScaledObject", "TriggerAuthentication"} {
		if len(full[k]) == 0 {
			t.Errorf("full values render no %s", k)
		}
	}
	if len(full["Secret"]) != 0 {
		t.Error("with existingSecret the chart still writes a Secret")
	}
	for _, o := range full["Deployment"] {
		d := o.(*appsv1.Deployment)
		if d.Name != "prod-agentq-worker" {
			continue
		}
		if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; g <= 300 {
			t.Errorf("worker termination grace %ds is not above the longest step (300s)", g)
		}
		if d.Spec.Replicas != nil {
			t.Error("an autoscaled worker Deployment pins its replicas")
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/livez" || c.Image != "registry.example.com/agentq:1.2.3" {
			t.Errorf("worker container %+v", c)
		}
	}
	hpa := fullValues(t)
	hpa["worker"].(map[string]any)["keda"] = map[string]any{"enabled": false}
	hpa["worker"].(map[string]any)["autoscaling"] = map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 30}
	if k := decode(t, render(t, hpa)); len(k["HorizontalPodAutoscaler"]) != 1 || len(k["ScaledObject"]) != 0 {
		t.Errorf("worker.autoscaling renders %d HorizontalPodAutoscaler and %d ScaledObject", len(k["HorizontalPodAutoscaler"]), len(k["ScaledObject"]))
	}
}

// The agentq.yaml the chart writes is one agentq accepts with the
// environment the workers' pod gets; the dashboard loads the same file,
// without the providers' keys, with what its pod gets (its token, Redis'
// passwords), no key.
func TestChartConfigLoads(t *testing.T) {
	sets := map[string]map[string]any{"default": with(t, nil, "secrets.values.OPENAI_API_KEY", "sk-chart")}
	for _, f := range testValues {
		sets[f] = valuesFile(t, f)
	}
	for name, values := range sets {
		files := render(t, values)
		secrets := map[string]map[string]string{
			"dashboard-token": {"AGENTQ_DASHBOARD_TOKEN": "tok"}, "redis-auth": {"password": "pw"}, "sentinel-auth": {"sentinel-password": "spw"},
			"agentq-keys": {"OPENAI_API_KEY": "sk-o", "OPENAI_API_KEY_2": "sk-o2", "ANTHROPIC_API_KEY": "sk-a"},
		}
		for _, o := range decode(t, files)["Secret"] {
			s := o.(*corev1.Secret)
			secrets[s.Name] = s.StringData
		}
		cs := containers(t, files)
		env := podEnv(t, cs["prod-agentq-worker"], secrets)
		cm := configMap(t, files)
		cfg, err := config.Load(config.Input{Path: name + " agentq.yaml", Data: []byte(cm["agentq.yaml"]), LookupEnv: lookupIn(env)})
		if err != nil {
			t.Errorf("%s values: %v\n%s", name, err, cm["agentq.yaml"])
			continue
		}
		switch name {
		case "values-full.yaml":
			if cfg.Redis.URL != "rediss://redis.example.internal:6380/2" || cfg.Redis.Password.Reveal() != "pw" || cfg.Worker.Concurrency != 80 ||
				cfg.Worker.PollInterval.D() != 200*time.Millisecond || cfg.Limits.MaxSteps != 50 || len(cfg.Providers[0].Keys) != 2 {
				t.Errorf("full values: redis %+v, worker %+v, limits %+v", cfg.Redis, cfg.Worker, cfg.Limits)
			}
		case "values-sentinel.yaml":
			if s := cfg.Redis.Sentinel; s == nil || s.MasterName != "agentq" || len(s.Addrs) != 3 || s.Password.Reveal() != "spw" || cfg.Redis.Password.Reveal() != "pw" || cfg.Redis.TLS == nil {
				t.Errorf("sentinel values: redis %+v", cfg.Redis)
			}
		case "values-cluster.yaml":
			if len(cfg.Redis.Cluster) != 3 || cfg.Redis.TLS != nil {
				t.Errorf("cluster values: redis %+v", cfg.Redis)
			}
		case "values-tls.yaml":
			if cfg.Redis.URL != "rediss://redis.example.internal:6380" || cfg.Redis.Password.Reveal() != "pw" {
				t.Errorf("tls values: redis %+v", cfg.Redis)
			}
		case "default":
			if cfg.Redis.Addr != "redis:6379" || cfg.Providers[0].Keys[0].Reveal() != "sk-chart" {
				t.Errorf("default values: redis %+v, providers %+v", cfg.Redis, cfg.Providers)
			}
		}
		if d, ok := cs["prod-agentq-dashboard"]; ok {
			dcfg, err := config.Load(config.Input{Path: name + " agentq.yaml", Data: []byte(cm["agentq.yaml"]), LookupEnv: lookupIn(podEnv(t, d, secrets)),
				WithoutProviderKeys: true})
			if err != nil {
				t.Errorf("%s values: the dashboard's configuration does not load with its pod's environment: %v", name, err)
				continue
			}
			if len(dcfg.Providers) != len(cfg.Providers) || dcfg.Redis.Where() != cfg.Redis.Where() || dcfg.Redis.Password != cfg.Redis.Password ||
				!reflect.DeepEqual(dcfg.RouteNames(), cfg.RouteNames()) {
				t.Errorf("%s values: the dashboard's configuration is not the workers' without keys: %+v", name, dcfg)
			}
			for _, p := range dcfg.Providers {
				if len(p.Keys) != 0 {
					t.Errorf("%s values: the dashboard holds provider %s's keys", name, p.Name)
				}
			}
		}
	}
	// without a key the workers refuse to start, naming the variable
	cm := configMap(t, render(t, nil))
	if _, err := config.Load(config.Input{Path: "agentq.yaml", Data: []byte(cm["agentq.yaml"]), LookupEnv: lookupIn(nil)}); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("the default agentq.yaml without OPENAI_API_KEY: %v", err)
	}
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func configMap(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal([]byte(files[filepath.Join("agentq", "templates", "configmap.yaml")]), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

func TestChartSchemaRefusesBadValues(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]any{"worker": map[string]any{"replicas": 1, "concurrency": 0}}
	if _, err := chartutil.ToRenderValues(ch, bad, chartutil.ReleaseOptions{Name: "x"}, chartutil.DefaultCapabilities); err == nil || !strings.Contains(err.Error(), "concurrency") {
		t.Fatalf("concurrency 0 accepted: %v", err)
	}
}

// The chart ships the same Prometheus rules as deploy/prometheus (helm
// cannot read files outside the chart, so it keeps a copy).
func TestChartRulesMatch(t *testing.T) {
	a, err1 := os.ReadFile("prometheus/rules.yml")
	b, err2 := os.ReadFile("helm/agentq/files/rules.yml")
	if err1 != nil || err2 != nil || string(a) != string(b) {
		t.Fatal("helm/agentq/files/rules.yml differs from prometheus/rules.yml: copy it again")
	}
}
