package deploy

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/agentq/agentq/internal/config"
)

const chartDir = "helm/agentq"

func fullValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("testdata/values-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// render is `helm template`: the chart's templates with values, checked
// against values.schema.json.
func render(t *testing.T, values map[string]any) map[string]string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "prod", Namespace: "agentq", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decode checks every rendered manifest: Kubernetes kinds decode strictly
// into the API types (unknown or misspelled fields fail); CRDs are checked
// for their apiVersion and spec.
func decode(t *testing.T, files map[string]string) map[string][]runtime.Object {
	t.Helper()
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	kinds := map[string][]runtime.Object{}
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
			case "ServiceMonitor", "PrometheusRule", "ScaledObject":
				if !strings.Contains(head.APIVersion, "/") || len(head.Spec) == 0 {
					t.Errorf("%s: %s without apiVersion or spec", name, head.Kind)
				}
				kinds[head.Kind] = append(kinds[head.Kind], nil)
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

func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{"default": nil, "full": fullValues(t)} {
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
	for _, k := range []string{"Deployment", "Service", "ConfigMap", "Secret"} {
		if len(def[k]) == 0 {
			t.Errorf("default values render no %s", k)
		}
	}
	full := decode(t, render(t, fullValues(t)))
	for _, k := range []string{"Deployment", "Service", "ConfigMap", "Ingress", "HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule", "ScaledObject"} {
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
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/healthz" || c.Image != "registry.example.com/agentq:1.2.3" {
			t.Errorf("worker container %+v", c)
		}
	}
}

// The agentq.yaml the chart writes is one agentq accepts.
func TestChartConfigLoads(t *testing.T) {
	for name, values := range map[string]map[string]any{"default": nil, "full": fullValues(t)} {
		files := render(t, values)
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		if err := yaml.Unmarshal([]byte(files[filepath.Join("agentq", "templates", "configmap.yaml")]), &cm); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(config.Input{Path: name + " agentq.yaml", Data: []byte(cm.Data["agentq.yaml"]),
			LookupEnv: func(k string) (string, bool) { return "sk-x", k == "OPENAI_API_KEY" }})
		if err != nil {
			t.Errorf("%s values: %v\n%s", name, err, cm.Data["agentq.yaml"])
			continue
		}
		if name == "full" && (cfg.Redis.Sentinel == nil || cfg.Redis.Sentinel.MasterName != "agentq" || cfg.Worker.Concurrency != 80) {
			t.Errorf("full values: redis %+v, concurrency %d", cfg.Redis, cfg.Worker.Concurrency)
		}
	}
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
