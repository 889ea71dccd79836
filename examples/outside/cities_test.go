package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/agentqtest"
)

// One instance of the map: its item is the city, its answer the model's.
func TestResearchAnInstance(t *testing.T) {
	m := agentqtest.NewModel().Answer("default", " Oslo is cold. ")
	s, err := agentqtest.NewStep(agentqtest.Options{ID: "research", Item: "Oslo", Index: 2, Model: m})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(t.Context(), research)
	if err != nil || out != (Note{City: "Oslo", Text: "Oslo is cold."}) {
		t.Fatalf("research: %#v %v", out, err)
	}
	if reqs := m.Requests("default"); len(reqs) != 1 || !strings.Contains(reqs[0].Messages[0].Content, "Oslo") {
		t.Fatalf("the model was asked %+v", reqs)
	}
	// an item that is not a city is parked for a person, not retried
	bad, _ := agentqtest.NewStep(agentqtest.Options{ID: "research", Item: map[string]any{"x": 1}, Model: m})
	if _, err := bad.Run(t.Context(), research); agentqtest.VerdictOf(err).Kind != "dead_letter" {
		t.Fatalf("a bad item: %v, want a dead letter", err)
	}
}

// The fan-in reads every instance in order and skips a dead-lettered one.
func TestMergeTheMap(t *testing.T) {
	s, err := agentqtest.NewStep(agentqtest.Options{ID: "merge", Steps: map[string]agentq.StepView{
		"research": agentqtest.Map(Note{City: "Oslo", Text: "cold"}, agentqtest.Missing, Note{City: "Reykjavik", Text: "colder"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(t.Context(), merge)
	got, _ := out.(map[string]any)
	if err != nil || got["notes"] != "Oslo: cold\nReykjavik: colder" || got["cities"] != 2 || got["missing"] != 1 {
		t.Fatalf("merge: %#v %v", out, err)
	}
}

// The whole workflow on a worker, against the Redis at REDIS_ADDR and the
// OpenAI-compatible provider at PROVIDER_URL (agentq's own tests run it
// against a real Redis and its fake provider).
func TestTheWorkflowRuns(t *testing.T) {
	if os.Getenv("REDIS_ADDR") == "" || os.Getenv("PROVIDER_URL") == "" {
		t.Skip("set REDIS_ADDR and PROVIDER_URL to run the workflow")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- serve(ctx, "agentq.yaml", agentq.WithReady(func() { close(ready) })) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the worker stopped: %v", err)
	}
	cfg, err := agentq.LoadConfig("agentq.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, err := os.ReadFile("workflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.Parse("workflow.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.Wait(ctx, id, 50*time.Millisecond)
	if err != nil || wf.State != agentq.StateCompleted {
		t.Fatalf("the workflow: %v %+v", err, wf)
	}
	steps := map[string]agentq.StepRecord{}
	for _, s := range wf.Steps {
		steps[s.ID] = s
	}
	var merged struct {
		Cities  int    `json:"cities"`
		Missing int    `json:"missing"`
		Notes   string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(steps["merge"].Output), &merged); err != nil || merged.Cities < 2 || merged.Missing != 0 {
		t.Fatalf("merge's output %s: want every city the plan listed (%v)", steps["merge"].Output, err)
	}
	if m := steps["research"].Map; m == nil || m.Items != merged.Cities {
		t.Fatalf("research's map %+v: want one instance per city (%d)", m, merged.Cities)
	}
	if r := steps["report"]; r.Output == "" || !strings.Contains(string(r.ToolCalls), "word_count") {
		t.Fatalf("report: output %q, tool calls %s: want an answer after a word_count call", r.Output, r.ToolCalls)
	}
	controls(ctx, t, c, id)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the worker's graceful stop: %v", err)
	}
}

// controls drives a finished workflow and an approval with the client's
// verbs, as a producer (or an operator's tool) does.
func controls(ctx context.Context, t *testing.T, c *agentq.Client, id string) {
	t.Helper()
	done, err := c.List(ctx, agentq.ListOptions{State: agentq.StateCompleted, Name: "cities", Limit: 10})
	if err != nil || len(done) != 1 || done[0].ID != id {
		t.Fatalf("completed cities workflows: %+v %v", done, err)
	}
	gen, err := c.Rerun(ctx, id, "merge")
	if err != nil || gen != 1 {
		t.Fatalf("rerun from merge: %d %v", gen, err)
	}
	if wf, err := c.Wait(ctx, id, 50*time.Millisecond); err != nil || wf.State != agentq.StateCompleted || wf.Generation != 1 {
		t.Fatalf("after the rerun: %+v %v", wf, err)
	}
	spec, err := c.Parse("review.yaml", []byte("name: review\nsteps:\n  - { id: ok, approve: { message: \"ship it?\" } }\n"))
	if err != nil {
		t.Fatal(err)
	}
	rid, err := c.Submit(ctx, spec, agentq.WithIdempotencyKey("review-1"), agentq.WithDeadline(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for {
		wf, err := c.Status(ctx, rid)
		if err != nil {
			t.Fatal(err)
		}
		if wf.State == agentq.StateWaiting {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the review did not wait: %+v", wf)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := c.Approve(ctx, rid, "ok", "looks right"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reject(ctx, rid, "ok", "too late"); !errors.Is(err, agentq.ErrNotWaiting) {
		t.Fatalf("a second decision: %v", err)
	}
	if wf, err := c.Wait(ctx, rid, 50*time.Millisecond); err != nil || wf.State != agentq.StateCompleted {
		t.Fatalf("the approved review: %+v %v", wf, err)
	}
	dls, err := c.DeadLetters(ctx)
	if err != nil || len(dls) != 0 {
		t.Fatalf("dead letters: %+v %v", dls, err)
	}
	keys, err := c.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].State != agentq.KeyOK {
		t.Fatalf("keys: %+v %v", keys, err)
	}
	if err := c.EnableKey(ctx, keys[0].Fingerprint); err != nil {
		t.Fatal(err)
	}
}
