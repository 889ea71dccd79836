package agentq_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
)

// The Go client has the enqueue command's verbs: approve and reject a
// waiting step, list workflows by state and name a page at a time, review
// dead letters by workflow and step (requeue, discard), rerun from a step.
// It has them over Redis (NewClient) and over a dashboard's HTTP API
// (NewServerClient), the same methods on the same workflows.
func TestTheClientHasTheCLIsVerbs(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	cfg := sdkConfig(t, e)
	var mu sync.Mutex
	failed := map[string]bool{}
	ready := make(chan struct{})
	w, err := agentq.NewWorker(cfg, agentq.WithReady(func() { close(ready) }))
	if err != nil {
		t.Fatal(err)
	}
	w.RegisterSpec("greeter", []byte("name: greeter\nsteps:\n  - { id: s, run: once }\n"))
	w.HandleStep("once", func(ctx context.Context, s *agentq.Step) (any, error) {
		mu.Lock()
		first := !failed[s.Workflow()]
		failed[s.Workflow()] = true
		mu.Unlock()
		if first { // the first attempt of each workflow is parked
			return nil, agentq.DeadLetter(errors.New("needs a look"))
		}
		return "ok", nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}
	c, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Run("redis", func(t *testing.T) { clientVerbs(t, ctx, c, "redis") })
	t.Run("server", func(t *testing.T) { clientVerbs(t, ctx, serverClient(t, e), "server") })
}

// serverClient is a client over a dashboard on e's Redis, served until the
// test ends.
func serverClient(t *testing.T, e *testenv.Env) *agentq.Client {
	t.Helper()
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return agentq.NewServerClient(hs.URL, "")
}

// clientVerbs drives every verb through c, on workflows named after via.
func clientVerbs(t *testing.T, ctx context.Context, c *agentq.Client, via string) {
	parse := func(y string) *agentq.Spec {
		s, err := c.Parse("t.yaml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	gate := parse("name: gate-" + via + "\nsteps:\n  - { id: review, approve: { message: \"ok?\" } }\n")
	parked := parse("name: parked-" + via + "\nsteps:\n  - { id: s, run: once }\n")
	var gates, parks []string
	for range 3 {
		id, err := c.Submit(ctx, gate)
		if err != nil {
			t.Fatal(err)
		}
		gates = append(gates, id)
		if id, err = c.Submit(ctx, parked); err != nil {
			t.Fatal(err)
		}
		parks = append(parks, id)
	}
	wait := func(id, state string) *agentq.Workflow {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			wf, err := c.Status(ctx, id)
			if err == nil && wf.State == state {
				return wf
			}
			if time.Now().After(deadline) {
				t.Fatalf("workflow %s: %v %v, want %s", id, wf, err, state)
			}
			<-time.After(20 * time.Millisecond)
		}
	}
	for _, id := range gates {
		wait(id, agentq.StateWaiting)
	}
	for _, id := range parks {
		wait(id, agentq.StateBlocked)
	}

	// approve and reject; a second decision is refused
	if err := c.Approve(ctx, gates[0], "review", "yes"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reject(ctx, gates[1], "review", "no"); err != nil {
		t.Fatal(err)
	}
	if err := c.Approve(ctx, gates[0], "review", "again"); !errors.Is(err, agentq.ErrNotWaiting) {
		t.Fatalf("a second decision: %v, want ErrNotWaiting", err)
	}
	wait(gates[0], agentq.StateCompleted)
	wait(gates[1], agentq.StateCompleted)

	// a signal completes the step waiting on it with its data; a bad one
	// is refused; a second send of an idempotency key is a duplicate
	paid, err := c.Submit(ctx, parse("name: paid-"+via+"\nsteps:\n  - { id: paid, wait_for: { signal: payment.succeeded, match: "+via+" } }\n"))
	if err != nil {
		t.Fatal(err)
	}
	wait(paid, agentq.StateWaiting)
	if err := c.Signal(ctx, "pay ment", via, nil); !errors.Is(err, agentq.ErrBadSignal) {
		t.Fatalf("a bad signal: %v, want ErrBadSignal", err)
	}
	if err := c.Signal(ctx, "payment.succeeded", via, map[string]int{"amount": 3}); err != nil {
		t.Fatal(err)
	}
	if wf := wait(paid, agentq.StateCompleted); wf.Steps[0].Output != `{"amount":3}` {
		t.Fatalf("the signaled step's output %q", wf.Steps[0].Output)
	}
	// specs stored by name: the worker's registered one, and puts that
	// make a version only when the content changes
	name := "research-" + via
	v1, err := c.PutSpec(ctx, name, []byte("name: research\nsteps:\n  - { id: s, run: once }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.PutSpec(ctx, name, []byte("name: research\nsteps:\n  - { id: s, run: once }\n")); err != nil || again != v1 {
		t.Fatalf("the same spec again: version %d (%v), want %d", again, err, v1)
	}
	v2, err := c.PutSpec(ctx, name, []byte("name: research\nsteps:\n  - { id: s2, run: once }\n"))
	if err != nil || v2 != v1+1 {
		t.Fatalf("a changed spec: version %d (%v), want %d", v2, err, v1+1)
	}
	if _, err := c.PutSpec(ctx, "bad name", []byte("name: x\nsteps:\n  - { id: s, run: once }\n")); err == nil {
		t.Fatal("a bad spec name was stored")
	}
	stored, err := c.StoredSpecs(ctx)
	found := map[string]int{}
	for _, s := range stored {
		found[s.Name] = s.Version
	}
	if err != nil || found[name] != v2 || found["greeter"] < 1 {
		t.Fatalf("stored specs %+v (%v): want %s at %d and the worker's greeter", stored, err, name, v2)
	}
	storedSpecs(t, ctx, c, name, v1, v2)
	sig := agentq.Signal{Name: "payment.succeeded", Match: via, IdempotencyKey: "evt-" + via}
	first, err := c.SendSignal(ctx, sig)
	if err != nil || !first.Kept {
		t.Fatalf("a send nothing waits for: %+v %v", first, err)
	}
	if again, err := c.SendSignal(ctx, sig); err != nil || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("the key sent again: %+v %v", again, err)
	}

	// list by state and name, a page at a time: two pages hold the three
	// parked workflows once each (newest first, by the millisecond)
	page1, err := c.List(ctx, agentq.ListOptions{Name: "parked-" + via, Limit: 2})
	if err != nil || len(page1) != 2 {
		t.Fatalf("first page of parked: %v %v", ids(page1), err)
	}
	page2, err := c.List(ctx, agentq.ListOptions{Name: "parked-" + via, Limit: 2, After: page1[1].ID})
	if err != nil || len(page2) != 1 {
		t.Fatalf("second page of parked: %v %v", ids(page2), err)
	}
	got := append(ids(page1), ids(page2)...)
	slices.Sort(got)
	want := slices.Clone(parks)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want each of %v once", got, want)
	}
	if _, err := c.List(ctx, agentq.ListOptions{After: "wf_nope"}); !errors.Is(err, agentq.ErrNotFound) || !strings.Contains(err.Error(), `after "wf_nope"`) {
		t.Fatalf("a page after an unknown id: %v, want ErrNotFound naming the cursor", err)
	}
	long := "wf_" + strings.Repeat("x", 100_000)
	if _, err := c.List(ctx, agentq.ListOptions{After: long}); !errors.Is(err, agentq.ErrNotFound) || len(err.Error()) > 400 || strings.Contains(err.Error(), "store:") {
		t.Fatalf("a page after a 100 KB id: %d-byte error %.300q, want ErrNotFound naming the cursor's start", len(err.Error()), err)
	}
	if _, err := c.List(ctx, agentq.ListOptions{State: "wiating"}); !errors.Is(err, agentq.ErrUnknownState) || !strings.Contains(err.Error(), "waiting") {
		t.Fatalf("a list by a state that is not one: %v, want ErrUnknownState naming the states", err)
	}
	if ws, err := c.List(ctx, agentq.ListOptions{State: agentq.StateWaiting, Name: "gate-" + via}); err != nil || len(ws) != 1 || ws[0].ID != gates[2] {
		t.Fatalf("waiting workflows: %v %v", ids(ws), err)
	}

	// dead letters by workflow and step
	dls, err := c.DeadLetters(ctx)
	if err != nil || len(dls) != 3 {
		t.Fatalf("dead letters: %+v %v", dls, err)
	}
	if dls, err := c.DeadLettersOfClass(ctx, "handler"); err != nil || len(dls) != 3 {
		t.Fatalf("dead letters of class handler: %+v %v", dls, err)
	}
	if dls, err := c.DeadLettersOfClass(ctx, "server"); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters of class server: %+v %v", dls, err)
	}
	if _, err := c.DeadLettersOfClass(ctx, "sever"); err == nil || !strings.Contains(err.Error(), "server") {
		t.Fatalf("dead letters of a class that is not one: %v, want the classes named", err)
	}
	if err := c.Requeue(ctx, parks[0], "s"); err != nil {
		t.Fatal(err)
	}
	wait(parks[0], agentq.StateCompleted)
	if err := c.Discard(ctx, parks[1], "s"); err != nil {
		t.Fatal(err)
	}
	wait(parks[1], agentq.StateFailed)
	if err := c.Requeue(ctx, parks[1], "s"); !errors.Is(err, agentq.ErrNoDeadLetter) {
		t.Fatalf("requeue of a discarded step: %v, want ErrNoDeadLetter", err)
	}
	d, err := c.DeadLetterDetail(ctx, parks[2], "s")
	if err != nil || d.Workflow != parks[2] || d.Step != "s" || d.Prompt != "run once with null" || !strings.Contains(d.StepError, "needs a look") {
		t.Fatalf("the third dead letter: %+v %v", d, err)
	}
	if _, err := c.DeadLetterDetail(ctx, parks[0], "s"); !errors.Is(err, agentq.ErrNoDeadLetter) {
		t.Fatalf("detail of a requeued step: %v, want ErrNoDeadLetter", err)
	}
	if _, err := c.RequeueAll(ctx, "rate_limitd"); !errors.Is(err, agentq.ErrUnknownClass) || !strings.Contains(err.Error(), "rate_limited") {
		t.Fatalf("requeue of a class that is not one: %v, want ErrUnknownClass naming the classes", err)
	}
	if n, err := c.RequeueAll(ctx, "rate_limited"); err != nil || n != 0 {
		t.Fatalf("requeue of class rate_limited: %d %v, want none", n, err)
	}
	if n, err := c.RequeueAll(ctx, ""); err != nil || n != 1 {
		t.Fatalf("requeue of all: %d %v, want the one left", n, err)
	}
	wait(parks[2], agentq.StateCompleted)
	if sp, err := c.Spec(ctx, parks[2]); err != nil || sp.Name != "parked-"+via || len(sp.Steps) != 1 || sp.Steps[0].Run != "once" {
		t.Fatalf("the spec of a workflow: %+v %v", sp, err)
	}

	// rerun a finished workflow from a step
	if gen, err := c.Rerun(ctx, parks[0], "s"); err != nil || gen != 1 {
		t.Fatalf("rerun: %d %v", gen, err)
	}
	if wf := wait(parks[0], agentq.StateCompleted); wf.Generation != 1 {
		t.Fatalf("after the rerun: run %d", wf.Generation)
	}
	if _, err := c.Rerun(ctx, gates[2], "review"); !errors.Is(err, agentq.ErrNotFinished) {
		t.Fatalf("rerun of a waiting workflow: %v, want ErrNotFinished", err)
	}

	// a rerun of a blocked workflow takes its dead letter with it: the
	// letter belonged to the run that ended
	p, err := c.Submit(ctx, parked)
	if err != nil {
		t.Fatal(err)
	}
	wait(p, agentq.StateBlocked)
	if _, err := c.Rerun(ctx, p, "s"); err != nil {
		t.Fatal(err)
	}
	wait(p, agentq.StateCompleted)
	if dls, err := c.DeadLetters(ctx); err != nil || slices.ContainsFunc(dls, func(d agentq.ParkedStep) bool { return d.Workflow == p }) {
		t.Fatalf("dead letters after the rerun: %+v %v, want none of %s", dls, err, p)
	}

	// a wait that ends with its context returns the context's error (and
	// the workflow as last read, when there was a read)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if wf, err := c.Wait(wctx, gates[2], 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) || wf != nil && wf.State != agentq.StateWaiting {
		t.Fatalf("a wait past its deadline: %v %v, want the deadline's error", wf, err)
	}
	// a limit of 0 or less is the default page, as List documents
	if ws, err := c.List(ctx, agentq.ListOptions{Name: "parked-" + via, Limit: -1}); err != nil || len(ws) != 4 {
		t.Fatalf("a page with limit -1: %v %v, want the four parked", ids(ws), err)
	}
}

// A server that does not answer is a Redis that does not answer to the
// caller: ErrUnavailable (wait, and try again), never a key or a password
// of the URL in the error.
func TestAServerClientThatCannotReachItsServer(t *testing.T) {
	c := agentq.NewServerClient("http://user:s3cr3t-pass@127.0.0.1:1", "")
	_, err := c.Status(t.Context(), "wf_x")
	if !errors.Is(err, agentq.ErrUnavailable) || strings.Contains(err.Error(), "s3cr3t-pass") {
		t.Fatalf("an unreachable server: %v, want ErrUnavailable without the URL's password", err)
	}
}

func ids(ws []agentq.Workflow) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

// Keys and EnableKey: a key a provider refused is disabled for every
// worker, shown by fingerprint (never the key), and enabled again.
func TestTheClientShowsAndEnablesKeys(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Keys: []string{testenv.Keys[1]}}})
	cfg := sdkConfig(t, e)
	w, err := agentq.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	c, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	spec, err := c.Parse("t.yaml", []byte("name: k\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	if err != nil {
		t.Fatal(err)
	}
	var id string
	poll.Until(t, 20*time.Second, func() (bool, string) { // once the worker advertises
		id, err = c.Submit(ctx, spec)
		return err == nil, fmt.Sprint(err)
	})
	if _, err := c.Wait(ctx, id, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var disabled string
	keys, err := c.Keys(ctx)
	for _, k := range keys {
		if k.State == agentq.KeyDisabled {
			disabled = k.Fingerprint
		}
		if strings.Contains(k.Fingerprint, testenv.Keys[0]) || strings.Contains(k.ID, testenv.Keys[0]) {
			t.Fatalf("a key's text in %+v", k)
		}
	}
	if err != nil || disabled == "" {
		t.Fatalf("keys %+v (%v): want the refused key disabled", keys, err)
	}
	// a client over the dashboard's API sees the same keys, and enables
	// every key at once
	sc := serverClient(t, e)
	if over, err := sc.Keys(ctx); err != nil || !slices.EqualFunc(over, keys, func(a, b agentq.KeyInfo) bool { return a.Fingerprint == b.Fingerprint && a.State == b.State }) {
		t.Fatalf("keys over the API %+v (%v), over Redis %+v", over, err, keys)
	}
	if enabled, err := sc.EnableAllKeys(ctx); err != nil || !slices.Equal(enabled, []string{disabled}) {
		t.Fatalf("EnableAllKeys: %v %v, want [%s]", enabled, err, disabled)
	}
	keys, _ = c.Keys(ctx)
	for _, k := range keys {
		if k.Fingerprint == disabled && k.State != agentq.KeyOK {
			t.Fatalf("after EnableAllKeys: %+v", k)
		}
	}
	if err := c.EnableKey(ctx, disabled); err != nil {
		t.Fatalf("enabling a key that is fine: %v", err)
	}
	for _, cl := range []*agentq.Client{c, sc} {
		if err := cl.EnableKey(ctx, "nope#9"); !errors.Is(err, agentq.ErrUnknownKey) {
			t.Fatalf("an unknown key: %v, want ErrUnknownKey", err)
		}
	}
}

// storedSpecs reads back spec name's versions v1 and v2 (whose steps are
// s and s2) with StoredSpec: the latest, each by number, and the errors.
func storedSpecs(t *testing.T, ctx context.Context, c *agentq.Client, name string, v1, v2 int) {
	t.Helper()
	for _, c2 := range []struct {
		ask, want int
		step      string
	}{{0, v2, "s2"}, {v2, v2, "s2"}, {v1, v1, "s"}} {
		sp, v, err := c.StoredSpec(ctx, name, c2.ask)
		if err != nil || v != c2.want || sp.Name != "research" || len(sp.Steps) != 1 || sp.Steps[0].ID != c2.step || sp.Steps[0].Run != "once" {
			t.Fatalf("StoredSpec(%s, %d) = %+v, %d, %v; want version %d with step %s", name, c2.ask, sp, v, err, c2.want, c2.step)
		}
	}
	if _, _, err := c.StoredSpec(ctx, name, v2+1); !errors.Is(err, agentq.ErrNoSpec) {
		t.Fatalf("a version not stored: %v, want ErrNoSpec", err)
	}
	if _, _, err := c.StoredSpec(ctx, "never-stored", 0); !errors.Is(err, agentq.ErrNoSpec) {
		t.Fatalf("a name not stored: %v, want ErrNoSpec", err)
	}
	for _, bad := range []struct {
		name    string
		version int
		want    string
	}{{name, -1, "a version is 1 or more"}, {"bad name", 0, "bad spec name"}} {
		if _, _, err := c.StoredSpec(ctx, bad.name, bad.version); err == nil || !strings.Contains(err.Error(), bad.want) || errors.Is(err, agentq.ErrNoSpec) {
			t.Fatalf("StoredSpec(%q, %d): %v, want %q", bad.name, bad.version, err, bad.want)
		}
	}
}
