package deploy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// The dashboard's pod holds no provider key, whatever the providers: no
// variable from the API-key Secret (not even an anthropic provider's, which
// agentq used to need to load the configuration), no envFrom, no volume
// from a Secret. It reads the workers' agentq.yaml without the keys.
func TestChartDashboardGetsNoProviderKey(t *testing.T) {
	dash := map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "dashboard-token"}}
	anthropic := with(t, with(t, nil, "config.providers", []any{
		map[string]any{"name": "claude", "kind": "anthropic", "keys": []any{"${ANTHROPIC_API_KEY}"}},
	}), "config.routes", map[string]any{"default": map[string]any{"targets": []any{map[string]any{"provider": "claude", "model": "m"}}}})
	sets := map[string]map[string]any{
		"default":          with(t, with(t, nil, "secrets.values.OPENAI_API_KEY", "sk-chart"), "dashboard", dash),
		"anthropic":        with(t, with(t, anthropic, "secrets.values.ANTHROPIC_API_KEY", "sk-a"), "dashboard", dash),
		"values-full.yaml": fullValues(t),
	}
	for name, values := range sets {
		files := render(t, values)
		d := dashboardContainer(t, files)
		if d == nil {
			t.Fatalf("%s: no dashboard", name)
		}
		if len(d.EnvFrom) != 0 {
			t.Errorf("%s: the dashboard takes its environment from %+v", name, d.EnvFrom)
		}
		allowed := map[string]bool{"dashboard-token": true, "redis-auth": true}
		for _, e := range d.Env {
			if r := e.ValueFrom; r != nil && (r.SecretKeyRef == nil || !allowed[r.SecretKeyRef.Name]) {
				t.Errorf("%s: the dashboard's %s comes from %+v", name, e.Name, r)
			}
			if e.Name == "AGENTQ_CONFIG" && e.Value != "/etc/agentq/agentq.yaml" {
				t.Errorf("%s: the dashboard reads %s, not the workers' agentq.yaml", name, e.Value)
			}
		}
		for _, o := range decode(t, files)["Deployment"] {
			if dep := o.(*appsv1.Deployment); dep.Name == "prod-agentq-dashboard" {
				for _, v := range dep.Spec.Template.Spec.Volumes {
					if v.Secret != nil || v.Projected != nil || v.CSI != nil {
						t.Errorf("%s: the dashboard mounts %+v", name, v)
					}
				}
			}
		}
	}
}
