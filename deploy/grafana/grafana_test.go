// Package grafana holds the Grafana dashboard; its test checks that every
// query names metrics agentq or asynq actually export.
package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

func TestDashboardQueriesKnownMetrics(t *testing.T) {
	data, err := os.ReadFile("agentq.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	known := regexp.MustCompile(`^(agentq_(llm_requests_total|llm_request_duration_seconds_bucket|llm_tokens_total|fallbacks_total|breaker_state|target_health_score|key_events_total|steps_total|workflows_total|dead_letters_total)|agentq:(llm_call_success:ratio_rate2m|llm_success:ratio_rate2m|fallback:ratio_rate5m|backlog:ratio)|asynq_(tasks_enqueued_total|queue_latency_seconds|queue_size|tasks_processed_total))$`)
	name := regexp.MustCompile(`\b(agentq[_:][a-z0-9_:]+|asynq_[a-z_]+)`)
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				n++
				if !known.MatchString(m) {
					t.Errorf("panel %q queries %s, which nothing exports", p.Title, m)
				}
			}
		}
	}
	if d.UID == "" || len(d.Panels) < 10 || n < 15 {
		t.Fatalf("dashboard %q has %d panels and %d metric references", d.UID, len(d.Panels), n)
	}
}
