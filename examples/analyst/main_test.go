package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The example runs as the README's first command runs it: on the embedded
// default, through the scripted outage, to a report built from the
// database's figures with a tool call in between.
func TestAnalystSurvivesTheOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, ""); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"sql       attempt 1 failed (server)",  // the outage: both providers 503
		"sql       done by backup/claude-demo", // failover
		"rows      done by code:run_sql",       // Go ran the query
		"stats     done by code:growth",        // Go computed the statistics
		"headlines degraded",                   // the dead provider: optional, degraded
		"report    done by backup/claude-demo", // the primary's 500s: failover
		`"region":"north","total":150900`,      // the tool's figure reached the model
		"status_503 ×3", "status_500 ×2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
