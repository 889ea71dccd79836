package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentq/agentq/internal/config"
)

// KEDA's kinds, with the fields of theirs the chart may use (KEDA's API
// is not a dependency of this module): decodeKEDA refuses any other field,
// and trigger metadata values that are not YAML strings (the CRD wants
// strings: `listLength: 5` is refused by the API server).
type (
	kedaMeta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	kedaScaledObject struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Metadata   kedaMeta `yaml:"metadata"`
		Spec       struct {
			ScaleTargetRef struct {
				Name string `yaml:"name"`
			} `yaml:"scaleTargetRef"`
			MinReplicaCount *int32        `yaml:"minReplicaCount"`
			MaxReplicaCount *int32        `yaml:"maxReplicaCount"`
			Triggers        []kedaTrigger `yaml:"triggers"`
		} `yaml:"spec"`
	}
	kedaTrigger struct {
		Type              string                 `yaml:"type"`
		Metadata          stringsOnlyMap         `yaml:"metadata"`
		AuthenticationRef *struct{ Name string } `yaml:"authenticationRef"`
	}
	kedaTriggerAuthentication struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Metadata   kedaMeta `yaml:"metadata"`
		Spec       struct {
			SecretTargetRef []kedaSecretRef `yaml:"secretTargetRef"`
		} `yaml:"spec"`
	}
	kedaSecretRef struct {
		Parameter string `yaml:"parameter"`
		Name      string `yaml:"name"`
		Key       string `yaml:"key"`
	}
	stringsOnlyMap map[string]string
)

func (m *stringsOnlyMap) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: metadata is not a map", n.Line)
	}
	*m = stringsOnlyMap{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			return fmt.Errorf("line %d: metadata %s is %s, not a string", v.Line, k.Value, v.Tag)
		}
		(*m)[k.Value] = v.Value
	}
	return nil
}

func decodeKEDA(kind, doc string) (any, error) {
	var head struct {
		APIVersion string `yaml:"apiVersion"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
		return nil, err
	}
	if head.APIVersion != "keda.sh/v1alpha1" {
		return nil, fmt.Errorf("apiVersion %q, want keda.sh/v1alpha1", head.APIVersion)
	}
	var obj any = &kedaScaledObject{}
	if kind == "TriggerAuthentication" {
		obj = &kedaTriggerAuthentication{}
	}
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// renderRefused renders values that must be refused and returns the
// refusal.
func renderRefused(t *testing.T, values map[string]any) string {
	t.Helper()
	if _, err := renderErr(values); err != nil {
		return err.Error()
	}
	t.Fatalf("values accepted: %v", values)
	return ""
}

// with returns a copy of base (nil: no values) with value set at path
// ("a.b.c"), as `helm template --set a.b.c=value` would.
func with(t *testing.T, base map[string]any, path string, value any) map[string]any {
	t.Helper()
	out := map[string]any{}
	if base != nil {
		data, _ := json.Marshal(base)
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
	}
	m := out
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = value
	return out
}

// A misspelled or unknown key is refused by the schema, naming the key,
// at every depth; so is a config key agentq.yaml does not have, and redis
// in config (the chart writes it from its own redis section).
func TestChartSchemaRefusesUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		path string
		val  any
		name string
	}{
		{"redis.adr", "x", "adr"}, // helm template --set redis.adr=x
		{"imag", map[string]any{"tag": "1"}, "imag"},
		{"worker.keda.pendingPerReplic", 5, "pendingPerReplic"},
		{"redis.sentinel.passwordSecret.nam", "x", "nam"},
		{"worker.resources.request", map[string]any{"cpu": "1"}, "request"},
		{"dashboard.ingress.tls", []any{map[string]any{"hosts": []any{"a.example"}, "secretname": "x"}}, "secretname"},
		{"dashboard.service.nodePort", 30080, "nodePort"},
		{"monitoring.serviceMonitor.intervall", "1m", "intervall"},
		{"config.route", map[string]any{}, "route"},
		{"config.redis", map[string]any{"addr": "r:6379"}, "redis"},
	} {
		msg := renderRefused(t, with(t, nil, tc.path, tc.val))
		if !strings.Contains(msg, "'"+tc.name+"'") || !strings.Contains(msg, "not allowed") {
			t.Errorf("--set %s: the refusal does not name %s: %s", tc.path, tc.name, msg)
		}
	}
	// and values of the wrong kind
	for path, val := range map[string]any{
		"worker.keda.pendingPerReplica": 0, "dashboard.service.type": "External", "redis.addr": "no-port",
		"redis.passwordSecret.key": "", "secrets.values.OPENAI_API_KEY": 1, "config.providers": "openai",
	} {
		values := with(t, nil, path, val)
		if path == "redis.passwordSecret.key" {
			values = with(t, values, "redis.passwordSecret.name", "redis-auth")
		}
		msg := renderRefused(t, values)
		if last := path[strings.LastIndex(path, ".")+1:]; !strings.Contains(msg, last) {
			t.Errorf("--set %s=%v: the refusal does not name %s: %s", path, val, last, msg)
		}
	}
}

// Every key of values.yaml is described in values.schema.json (with a
// type), and every object the chart defines refuses other keys; config's
// keys are exactly agentq.yaml's top-level keys but redis.
func TestChartSchemaDescribesEveryValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["definitions"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		if ref, ok := s["$ref"].(string); ok {
			s, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
		return s
	}
	// maps whose keys are the user's (names of variables, annotations,
	// resources) or agentq's (config's insides)
	free := map[string]bool{"config.providers": true, "config.routes": true, "secrets.values": true, "dashboard.ingress.annotations": true,
		"worker.resources": true, "worker.keda.shardNames": true}
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		s = resolve(s)
		if _, typed := s["type"]; !typed && s["enum"] == nil {
			t.Errorf("%s: no type in the schema", path)
		}
		m, ok := v.(map[string]any)
		if !ok || free[path] {
			return
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: the schema lets unknown keys through (additionalProperties is not false)", path)
		}
		props, _ := s["properties"].(map[string]any)
		for k, kv := range m {
			kpath := strings.TrimPrefix(path+"."+k, ".")
			ks, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s: in values.yaml, not in the schema", kpath)
				continue
			}
			walk(kpath, kv, ks)
		}
	}
	vdata, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(vdata, &values); err != nil {
		t.Fatal(err)
	}
	walk("", values, schema)
	// objects values.yaml leaves empty are described too
	for _, p := range []string{"worker.resources", "dashboard.ingress.tls.items"} {
		s := schema
		for _, k := range strings.Split(p, ".") {
			if k == "items" {
				s, _ = s["items"].(map[string]any)
				continue
			}
			props, _ := s["properties"].(map[string]any)
			ks, _ := props[k].(map[string]any)
			s = resolve(ks)
		}
		if s["additionalProperties"] != false {
			t.Errorf("%s: the schema lets unknown keys through", p)
		}
	}
	var want []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[config.Config]()) {
		if tag := strings.Split(f.Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" && tag != "redis" {
			want = append(want, tag)
		}
	}
	var got []string
	props, _ := schema["properties"].(map[string]any)
	cfg, _ := props["config"].(map[string]any)
	cprops, _ := cfg["properties"].(map[string]any)
	for k := range cprops {
		got = append(got, k)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("config allows %v, agentq.yaml has %v (without redis)", got, want)
	}
}

// The KEDA trigger reads the pending list on the Redis the workers use, in
// every mode, with the password (and the sentinels') through a
// TriggerAuthentication on the same Secrets.
func TestChartKEDATrigger(t *testing.T) {
	addr := with(t, nil, "worker.keda.enabled", true)
	all := []string{"critical", "default", "low"} // worker.queues' default
	for _, tc := range []struct {
		name   string
		values map[string]any
		typ    string
		meta   map[string]string // every trigger's, but its listName
		queues []string          // one trigger each, in this order
		refs   []kedaSecretRef
	}{
		{"addr (default values): every queue served", addr, "redis",
			map[string]string{"address": "redis:6379", "listLength": "50"}, all, nil},
		{"url without a port", with(t, with(t, addr, "redis.url", "redis://redis.example.internal"), "worker.keda.queues", []any{"low"}), "redis",
			map[string]string{"address": "redis.example.internal:6379", "listLength": "50"}, []string{"low"}, nil},
		{"webhooks configured: their queue too", with(t, addr, "config.webhooks", map[string]any{"secret": "${AGENTQ_WEBHOOK_SECRET}"}), "redis",
			map[string]string{"address": "redis:6379", "listLength": "50"}, append(all, "webhooks"), nil},
		{"values-full.yaml (rediss:// url)", valuesFile(t, "values-full.yaml"), "redis",
			map[string]string{"address": "redis.example.internal:6380", "databaseIndex": "2", "enableTLS": "true", "listLength": "20"}, []string{"critical"},
			[]kedaSecretRef{{"password", "redis-auth", "password"}}},
		{"values-tls.yaml (addr, tls: true)", valuesFile(t, "values-tls.yaml"), "redis",
			map[string]string{"address": "redis.example.internal:6380", "enableTLS": "true", "listLength": "50"}, all,
			[]kedaSecretRef{{"password", "redis-auth", "password"}}},
		{"values-sentinel.yaml", valuesFile(t, "values-sentinel.yaml"), "redis-sentinel",
			map[string]string{"addresses": "sentinel-0.sentinel:26379,sentinel-1.sentinel:26379,sentinel-2.sentinel:26379", "sentinelMaster": "agentq",
				"enableTLS": "true", "listLength": "50"}, all,
			[]kedaSecretRef{{"password", "redis-auth", "password"}, {"sentinelPassword", "sentinel-auth", "sentinel-password"}}},
		{"values-cluster.yaml", valuesFile(t, "values-cluster.yaml"), "redis-cluster",
			map[string]string{"addresses": "redis-0.redis:6379,redis-1.redis:6379,redis-2.redis:6379", "listLength": "50"}, []string{"low"}, nil},
	} {
		k := decode(t, render(t, tc.values))
		if len(k["ScaledObject"]) != 1 {
			t.Errorf("%s: %d ScaledObjects", tc.name, len(k["ScaledObject"]))
			continue
		}
		so := k["ScaledObject"][0].(*kedaScaledObject)
		if so.Spec.ScaleTargetRef.Name != "prod-agentq-worker" || len(so.Spec.Triggers) != len(tc.queues) {
			t.Errorf("%s: ScaledObject %+v, want a trigger for each of %v", tc.name, so.Spec, tc.queues)
			continue
		}
		var ta *kedaTriggerAuthentication
		if tc.refs != nil {
			if len(k["TriggerAuthentication"]) != 1 {
				t.Errorf("%s: %d TriggerAuthentications", tc.name, len(k["TriggerAuthentication"]))
				continue
			}
			ta = k["TriggerAuthentication"][0].(*kedaTriggerAuthentication)
			if !reflect.DeepEqual(ta.Spec.SecretTargetRef, tc.refs) {
				t.Errorf("%s: TriggerAuthentication %+v, want %+v", tc.name, ta.Spec.SecretTargetRef, tc.refs)
			}
		} else if len(k["TriggerAuthentication"]) != 0 {
			t.Errorf("%s: a TriggerAuthentication without a password", tc.name)
		}
		for i, tr := range so.Spec.Triggers {
			want := maps.Clone(tc.meta)
			want["listName"] = "asynq:{" + tc.queues[i] + "}:pending"
			if tr.Type != tc.typ || !reflect.DeepEqual(map[string]string(tr.Metadata), want) {
				t.Errorf("%s: trigger %d %s %v, want %s %v", tc.name, i, tr.Type, tr.Metadata, tc.typ, want)
			}
			switch {
			case ta == nil && tr.AuthenticationRef != nil:
				t.Errorf("%s: trigger %d names a TriggerAuthentication that is not there", tc.name, i)
			case ta != nil && (tr.AuthenticationRef == nil || tr.AuthenticationRef.Name != ta.Metadata.Name):
				t.Errorf("%s: trigger %d authenticationRef %+v, want %s", tc.name, i, tr.AuthenticationRef, ta.Metadata.Name)
			}
		}
	}
}

// Values the schema cannot judge alone are refused with one message naming
// them and the template they are about.
func TestChartRefusesContradictions(t *testing.T) {
	both := with(t, with(t, nil, "worker.keda.enabled", true), "worker.autoscaling.enabled", true)
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{both, "templates/worker-scaling.yaml: worker.autoscaling.enabled and worker.keda.enabled both scale the worker Deployment: enable one"},
		{with(t, fullValues(t), "worker.autoscaling", map[string]any{"enabled": true}), "templates/worker-scaling.yaml: worker.autoscaling.enabled and worker.keda.enabled both scale the worker Deployment: enable one"},
		{with(t, with(t, nil, "worker.keda.enabled", true), "worker.keda.queues", []any{"default", "batch"}), `templates/worker-scaling.yaml: worker.keda.queues: "batch" is not a queue the workers serve`},
		{with(t, nil, "redis.url", "redis://:hunter2@redis:6379"), "templates/configmap.yaml: redis.url carries a password"},
		{with(t, nil, "redis.sentinel.masterName", "agentq"), "templates/configmap.yaml: redis.sentinel.masterName is set without redis.sentinel.addrs"},
		{with(t, nil, "redis.sentinel.addrs", []any{"s:26379"}), "templates/configmap.yaml: redis.sentinel.addrs is set without redis.sentinel.masterName"},
		{with(t, nil, "redis.addr", ""), "templates/configmap.yaml: redis.addr, redis.url, redis.sentinel or redis.cluster is required"},
		{with(t, nil, "config.worker", map[string]any{"concurrency": 5}), "templates/configmap.yaml: config.worker.concurrency is set by the chart: use worker.concurrency"},
		{with(t, nil, "dashboard.enabled", true), "templates/dashboard.yaml: dashboard.tokenSecret.name is required with dashboard.enabled"},
	} {
		if msg := renderRefused(t, tc.values); !strings.Contains(msg, tc.want) {
			t.Errorf("refusal %q does not say %q", msg, tc.want)
		}
	}
}

func containers(t *testing.T, files map[string]string) map[string]corev1.Container {
	t.Helper()
	out := map[string]corev1.Container{}
	for _, o := range decode(t, files)["Deployment"] {
		d := o.(*appsv1.Deployment)
		out[d.Name] = d.Spec.Template.Spec.Containers[0]
	}
	return out
}

func dashboardContainer(t *testing.T, files map[string]string) *corev1.Container {
	t.Helper()
	if c, ok := containers(t, files)["prod-agentq-dashboard"]; ok {
		return &c
	}
	return nil
}

// podEnv is the environment the kubelet gives c, from secrets (by Secret
// name, then key); a key a Secret does not hold is an error unless the
// reference is optional.
func podEnv(t *testing.T, c corev1.Container, secrets map[string]map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		s, ok := secrets[ef.SecretRef.Name]
		if !ok {
			t.Errorf("container %s: envFrom Secret %s does not exist", c.Name, ef.SecretRef.Name)
		}
		for k, v := range s {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			v, ok := secrets[r.Name][r.Key]
			if ok {
				env[e.Name] = v
			} else if r.Optional == nil || !*r.Optional {
				t.Errorf("container %s: %s from Secret %s key %s, which does not exist", c.Name, e.Name, r.Name, r.Key)
			}
		default:
			t.Errorf("container %s: %s from %+v", c.Name, e.Name, e.ValueFrom)
		}
	}
	return env
}

// No API-key Secret unless there is a key: the default render has neither
// a Secret nor envFrom; a value makes both, with the non-empty values only;
// existingSecret is referenced as is. The dashboard never gets it.
func TestChartKeySecret(t *testing.T) {
	def := render(t, nil)
	k := decode(t, def)
	if len(k["Secret"]) != 0 {
		t.Errorf("the default values render a Secret: %s", def[filepath.Join("agentq", "templates", "secret.yaml")])
	}
	if c := containers(t, def)["prod-agentq-worker"]; len(c.EnvFrom) != 0 {
		t.Errorf("the default worker takes its environment from %+v", c.EnvFrom)
	}
	if r := renderRefused(t, with(t, nil, "secrets.values.openai-key", "x")); !strings.Contains(r, "openai-key") {
		t.Errorf("a variable name with a dash: %s", r)
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		secret string
		data   map[string]string
	}{
		{"a value", with(t, with(t, with(t, nil, "secrets.values.OPENAI_API_KEY", "sk-live"), "secrets.values.BACKUP_KEY", ""), "dashboard",
			map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "tok"}}), "prod-agentq-keys", map[string]string{"OPENAI_API_KEY": "sk-live"}},
		{"existingSecret", with(t, with(t, nil, "secrets.existingSecret", "mine"), "dashboard",
			map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "tok"}}), "mine", nil},
	} {
		files := render(t, tc.values)
		k := decode(t, files)
		cs := containers(t, files)
		w, d := cs["prod-agentq-worker"], cs["prod-agentq-dashboard"]
		if len(w.EnvFrom) != 1 || w.EnvFrom[0].SecretRef == nil || w.EnvFrom[0].SecretRef.Name != tc.secret {
			t.Errorf("%s: the worker's envFrom is %+v, want Secret %s", tc.name, w.EnvFrom, tc.secret)
		}
		if len(d.EnvFrom) != 0 {
			t.Errorf("%s: the dashboard takes its environment from %+v", tc.name, d.EnvFrom)
		}
		if tc.data == nil {
			if len(k["Secret"]) != 0 {
				t.Errorf("%s: the chart writes a Secret", tc.name)
			}
			continue
		}
		if len(k["Secret"]) != 1 {
			t.Errorf("%s: %d Secrets", tc.name, len(k["Secret"]))
			continue
		}
		s := k["Secret"][0].(*corev1.Secret)
		if s.Name != tc.secret || !reflect.DeepEqual(s.StringData, tc.data) {
			t.Errorf("%s: Secret %s %v, want %s %v", tc.name, s.Name, s.StringData, tc.secret, tc.data)
		}
	}
}

// The dashboard: probes on /readyz and /healthz, its token and Redis'
// password, no provider key (not even an anthropic provider's: it loads
// the workers' agentq.yaml without keys), and --allowed-hosts with its
// Service's names, the ingress host and dashboard.allowedHosts.
func TestChartDashboardPod(t *testing.T) {
	files := render(t, fullValues(t))
	d := dashboardContainer(t, files)
	if d == nil {
		t.Fatal("no dashboard")
	}
	if p := d.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v", p)
	}
	if p := d.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v", p)
	}
	if p := d.StartupProbe; p == nil || p.HTTPGet == nil || p.PeriodSeconds*p.FailureThreshold < 120 {
		t.Errorf("startup probe %+v does not wait out --wait-for-redis=2m", p)
	}
	var names []string
	for _, e := range d.Env {
		names = append(names, e.Name)
	}
	sort.Strings(names)
	if want := []string{"AGENTQ_CONFIG", "AGENTQ_DASHBOARD_TOKEN", "AGENTQ_REDIS_PASSWORD"}; !slices.Equal(names, want) || len(d.EnvFrom) != 0 {
		t.Errorf("dashboard environment %v from %+v, want %v and no envFrom", names, d.EnvFrom, want)
	}
	if cm := configMap(t, files); len(cm) != 1 || !strings.Contains(cm["agentq.yaml"], "ANTHROPIC_API_KEY") {
		t.Errorf("the ConfigMap is not the one agentq.yaml with the keys' variables: %v", cm)
	}
	args := strings.Join(d.Args, " ")
	wantHosts := "prod-agentq-dashboard,prod-agentq-dashboard.agentq,prod-agentq-dashboard.agentq.svc,prod-agentq-dashboard.agentq.svc.cluster.local,agentq.internal,agentq.example.org"
	if !strings.Contains(args, "--addr :8080 --allowed-hosts "+wantHosts) || !strings.Contains(args, "--read-only") {
		t.Errorf("dashboard args %q", args)
	}
}
