package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// The failover drill's workflows: a chord (three members and a fan-in),
// a chain of three steps, a map and its reduce, a code step making two
// durable calls before a prompt step, a child workflow (of the stored
// spec drillsub) before a prompt step, and a signal wait before a prompt
// step; their prompts made unique by the input.
const (
	drillChord = `name: chord
steps:
  - { id: a, route: solo, prompt: "a {{ .Input.n }}" }
  - { id: b, route: solo, prompt: "b {{ .Input.n }}" }
  - { id: c, route: solo, prompt: "c {{ .Input.n }}" }
  - { id: fanin, route: solo, prompt: "fan in {{ .Input.n }}", depends_on: [a, b, c] }
`
	drillChain = `name: chain
steps:
  - { id: one, route: solo, prompt: "one {{ .Input.n }}" }
  - { id: two, route: solo, prompt: "two {{ .Input.n }}", depends_on: [one] }
  - { id: three, route: solo, prompt: "three {{ .Input.n }}", depends_on: [two] }
`
	drillMap = `name: map
steps:
  - { id: m, for_each: "{{ .Input.items }}", route: solo, prompt: "item {{ .Item }} of {{ .Input.n }}" }
  - { id: reduce, route: solo, prompt: "reduce {{ .Input.n }}", depends_on: [m] }
`
	drillCode = `name: code
steps:
  - { id: ask, run: ask_twice, with: { n: "{{ .Input.n }}" } }
  - { id: sum, route: solo, prompt: "sum {{ .Input.n }}", depends_on: [ask] }
`
	drillSub = `name: drillsub
steps:
  - { id: s, route: solo, prompt: "child {{ .Input.n }}" }
`
	drillChild = `name: parent
steps:
  - { id: kid, workflow: { spec: drillsub, input: { n: "{{ .Input.n }}" } } }
  - { id: after, route: solo, prompt: "after child {{ .Input.n }}", depends_on: [kid] }
`
	drillSignal = `name: waits
steps:
  - { id: paid, wait_for: { signal: drill.paid, match: "{{ .Input.n }}", timeout: 10m } }
  - { id: ship, route: solo, prompt: "ship {{ .Input.n }}", depends_on: [paid] }
`
)

// drillSteps are the code steps of the drill's workflows: ask_twice makes
// two durable LLM calls (each kept before the next, so a retry after a
// failover asks only what was not kept).
var drillSteps = map[string]engine.StepFunc{"ask_twice": func(ctx context.Context, s *engine.CodeStep) (any, error) {
	var a struct {
		N int `json:"n"`
	}
	if err := s.Args(&a); err != nil {
		return nil, err
	}
	first, err := s.LLM().Chat(ctx, "solo", ask("code first "+strconv.Itoa(a.N)))
	if err != nil {
		return nil, err
	}
	second, err := s.LLM().Chat(ctx, "solo", ask("code second "+strconv.Itoa(a.N)+" after "+first.Text))
	if err != nil {
		return nil, err
	}
	return first.Text + " / " + second.Text, nil
}}

// drillKinds are the drill's workflows, in turn, with the prompts each
// sends the provider, once each when nothing is paid for twice (%[1]d:
// its input n; a map's %[2]d: each of its items; a code step's second
// prompt goes on with its first answer).
var drillKinds = []struct {
	spec    string
	prompts []string
	signal  bool // waits for the signal drill.paid, match its n
}{{drillChord, []string{"a %[1]d", "b %[1]d", "c %[1]d", "fan in %[1]d"}, false},
	{drillChain, []string{"one %[1]d", "two %[1]d", "three %[1]d"}, false},
	{drillMap, []string{"item %[2]d of %[1]d", "reduce %[1]d"}, false},
	{drillCode, []string{"code first %[1]d", "code second %[1]d after", "sum %[1]d"}, false},
	{drillChild, []string{"child %[1]d", "after child %[1]d"}, false},
	{drillSignal, []string{"ship %[1]d"}, true}}

// drillWorkflows is how many workflows the drill submits: a short run in
// make test, AGENTQ_DRILL_WORKFLOWS (make drill: 300) for the full one.
func drillWorkflows(t *testing.T) int { return drillEnv(t, "AGENTQ_DRILL_WORKFLOWS", 30) }

// drillMapItems is how many items each of the drill's maps has: 10 in
// make test, AGENTQ_DRILL_MAP_ITEMS (make drill: 100) for the full drill.
func drillMapItems(t *testing.T) int { return drillEnv(t, "AGENTQ_DRILL_MAP_ITEMS", 10) }

// drillEnv is the number in the environment variable name, or def.
func drillEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		t.Fatalf("%s=%q: want a number of at least 2", name, v)
	}
	return n
}

// The Sentinel failover drill, with redis.durability asking both replicas
// to confirm. Three sentinels watch a primary and two replicas; workflows
// (chords, chains, maps, code steps with durable calls, child workflows,
// signal waits) are submitted before and through the failover. One
// replica is frozen (it lags: it takes none of the stream) and the primary
// is SIGKILLed mid-run, so the sentinels promote the other replica; the
// lagging one is let go again once they have, and the dead primary's
// process is started again as a replica of the new primary (as the
// common charts' start scripts do: they ask the sentinels for the
// primary), so that two replicas can confirm again: until then, steps
// wait. Every submit (and signal) that was not told "done" is retried
// with its idempotency key until it is, as a producer following the docs
// does. Then:
//   - every workflow whose submit succeeded completes: none lost;
//   - the provider answered exactly once per step: no fan-in ran twice, no
//     confirmed answer was paid for twice;
//   - steps resume after the promotion (the time is logged; the full drill's
//     figures are in docs/durability.md).
func TestSentinelFailoverDrill(t *testing.T) {
	t.Parallel() // mostly waiting for Sentinel: alongside the other waiting tests
	n := drillWorkflows(t)
	sn := redistest.StartSentinels(t, 2)
	oldPrimary := sn.Primary.Addr()
	e := testenv.Start(t, testenv.Options{Sentinel: sn, Steps: drillSteps, RecordAnswered: 100_000,
		Durability: &config.Durability{Replicas: 2, Timeout: config.Duration(time.Second)},
		Scenario:   chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(100 * time.Millisecond)}}}})
	d := startDrill(t, e, n)

	// mid-run: a replica falls behind, and the primary dies
	lagging := sn.Replicas[1]
	lagging.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			lagging.Thaw()
		}
	}()
	killedAt := time.Now()
	sn.Primary.Kill()
	promoted := sn.WaitPromotion(t, oldPrimary, 30*time.Second)
	promotedAt := time.Now()
	lagging.Thaw()
	thawed = true
	// the dead primary's process comes back, as an orchestrator restarts
	// it, following the primary every sentinel names, so two replicas
	// can confirm again (left to the sentinels, its conversion takes them
	// 8s and more: docs/durability.md)
	everySentinelNames(t, sn, promoted)
	named := time.Since(promotedAt)
	sn.Primary.Start()
	replicaOf(t, oldPrimary, promoted)
	t.Logf("every sentinel named %s %s after its promotion; the old primary follows it", promoted, named.Round(time.Millisecond))
	t.Logf("primary %s killed; %s promoted after %s", oldPrimary, promoted, promotedAt.Sub(killedAt).Round(time.Millisecond))

	resumed := firstStepDone(t, e, promotedAt)
	back := time.Now()
	if now := sn.WaitReplicasOfMaster(t, 2, 60*time.Second); now != promoted {
		t.Logf("the sentinels failed over again, to %s (a loaded machine)", now)
	}
	t.Logf("two replicas in sync again %s after the promotion (known by %s)", time.Since(promotedAt).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	steps, answers := d.finish(t)
	t.Logf("%d workflows (%d provider calls), %d submits retried with their key; steps resumed %s after the promotion; %d answers",
		n, steps, d.retried, resumed.Round(time.Millisecond), answers)
}

// drill is a failover drill's workflows: submitted, each retried with its
// idempotency key on a *producer.SubmitError, as a producer following the
// docs does.
type drill struct {
	e       *testenv.Env
	items   int          // each map's items
	specs   []*spec.Spec // drillKinds' specs
	wg      sync.WaitGroup
	mu      sync.Mutex
	ids     []string // "" for a submit that failed for good (reported)
	retried int      // submits told "unreachable" or "not confirmed", then retried with their key
}

// startDrill submits n workflows (chords, chains, maps, code steps with durable calls): the first half
// before it returns, the rest one by one from then on, through the
// failover the test brings about.
func startDrill(t *testing.T, e *testenv.Env, n int) *drill {
	d := newDrill(t, e, n)
	ctx := t.Context()
	for i := range n / 2 {
		d.wg.Go(func() { d.submit(ctx, t, i) })
	}
	d.wg.Wait()
	d.wg.Go(func() {
		for i := n / 2; i < n; i++ {
			d.submit(ctx, t, i)
			time.Sleep(50 * time.Millisecond) //nolint: pacing the submits through the failover, not waiting for anything
		}
	})
	return d
}

// newDrill is a drill of n workflows on e, with the child's spec stored.
func newDrill(t *testing.T, e *testenv.Env, n int) *drill {
	d := &drill{e: e, items: drillMapItems(t), ids: make([]string, n)}
	for _, k := range drillKinds {
		d.specs = append(d.specs, e.Spec(k.spec))
	}
	if _, err := e.Client.PutSpec(t.Context(), "drillsub", e.Spec(drillSub)); err != nil {
		t.Fatal(err)
	}
	return d
}

// prompts are the prompts workflow i sends the provider when nothing is
// paid for twice (drillKinds).
func (d *drill) prompts(i int) []string {
	var out []string
	for _, p := range drillKinds[i%len(drillKinds)].prompts {
		if !strings.Contains(p, "%[2]d") {
			out = append(out, fmt.Sprintf(p, i))
			continue
		}
		for item := range d.items {
			out = append(out, fmt.Sprintf(p, i, item))
		}
	}
	return out
}

// calls is how many provider calls workflow i makes when nothing is paid
// for twice.
func (d *drill) calls(i int) int { return len(d.prompts(i)) }

// unanswered names the prompts of the workflows submitted that the
// provider never answered (the drill's env must record answered prompts:
// testenv.Options.RecordAnswered), with each one's step records.
func (d *drill) unanswered(t *testing.T) []string {
	answered := map[string]bool{}
	for _, p := range d.e.Chaos.Answered() {
		answered[strings.TrimSpace(p)] = true
	}
	var out []string
	for i, id := range d.ids {
		if id == "" {
			continue
		}
		for _, p := range d.prompts(i) {
			found := answered[p]
			for a := range answered {
				found = found || strings.HasPrefix(a, p+" ")
			}
			if !found {
				wf, err := d.e.Store.Get(t.Context(), id)
				out = append(out, fmt.Sprintf("workflow %d (%s): %q, its record %+v %v", i, id, p, wf, err))
			}
		}
	}
	return out
}

// answeredAgain is each prompt the provider answered more than once, with
// how many times.
func (d *drill) answeredAgain() []string {
	n := map[string]int{}
	for _, p := range d.e.Chaos.Answered() {
		n[strings.TrimSpace(p)]++
	}
	var out []string
	for p, c := range n {
		if c > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", p, c))
		}
	}
	slices.Sort(out)
	return out
}

// submit submits workflow i until it is told done (3 minutes at most:
// longer than a failover's slowest promotion the drills wait for), then,
// for a signal wait, sends its signal until it is told done.
func (d *drill) submit(ctx context.Context, t *testing.T, i int) {
	ws := *d.specs[i%len(d.specs)]
	items := make([]any, d.items)
	for j := range items {
		items[j] = j
	}
	ws.Input = map[string]any{"n": i, "items": items}
	var opts []producer.SubmitOption
	deadline := time.Now().Add(3 * time.Minute)
	for {
		sub, err := d.e.Client.SubmitWorkflow(ctx, &ws, opts...)
		if err == nil {
			d.mu.Lock()
			d.ids[i] = sub.ID
			d.mu.Unlock()
			if drillKinds[i%len(drillKinds)].signal {
				d.signal(ctx, t, i)
			}
			return
		}
		var se *producer.SubmitError
		if !errors.As(err, &se) || time.Now().After(deadline) {
			t.Errorf("submit %d: %v", i, err)
			return
		}
		if opts == nil {
			d.mu.Lock()
			d.retried++
			d.mu.Unlock()
		}
		opts = []producer.SubmitOption{producer.WithIdempotencyKey(se.Key)}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// signal sends workflow i's signal (drill.paid, match i) with an
// idempotency key of its own, again on any error but a bad signal, until
// it is told done (3 minutes at most, as submit): it is delivered, or kept for the step
// that begins waiting on it, once.
func (d *drill) signal(ctx context.Context, t *testing.T, i int) {
	s := producer.Signal{Name: "drill.paid", Match: strconv.Itoa(i), Data: []byte(`{"n":` + strconv.Itoa(i) + `}`),
		IdempotencyKey: "drill-paid-" + strconv.Itoa(i)}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := d.e.Client.Signal(ctx, s)
		if err == nil {
			return
		}
		if errors.Is(err, producer.ErrBadSignal) || time.Now().After(deadline) {
			t.Errorf("signal %d: %v", i, err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// finish waits for the submits and then for every workflow submitted to
// complete, and fails the test unless the provider answered once per
// call a step makes. It returns the calls and the answers.
func (d *drill) finish(t *testing.T) (steps, answers int) {
	t.Helper()
	d.wg.Wait()
	for i, id := range d.ids {
		if id == "" {
			continue // its submit failed for good: reported
		}
		d.e.Wait(t, id, 120*time.Second, store.StateCompleted)
		steps += d.calls(i)
	}
	answers = d.e.Chaos.Snapshot().Count("openai", "", "ok")
	if answers != steps {
		t.Errorf("%d provider answers for %d calls: %s; never answered: %q; answered more than once: %q", answers, steps,
			map[bool]string{true: "a step was paid for twice", false: "a step was never asked"}[answers > steps], d.unanswered(t), d.answeredAgain())
	}
	return steps, answers
}

// firstStepDone is how long after since the first step is done (the
// events of before, still buffered, dropped first): steps resume.
func firstStepDone(t *testing.T, e *testenv.Env, since time.Time) time.Duration {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-e.Events:
		default:
			drained = true
		}
	}
	giveUp := time.After(60 * time.Second)
	for {
		select {
		case ev := <-e.Events:
			if ev.State == store.StepDone {
				return time.Since(since)
			}
		case <-giveUp:
			t.Fatal("no step done within 60s of the promotion")
		}
	}
}
