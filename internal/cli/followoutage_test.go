package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

// three steps in a row: each one's events come after the one before's
const followChain = `name: chain3
steps:
  - { id: a, route: solo, prompt: "one" }
  - { id: b, route: solo, prompt: "two", depends_on: [a] }
  - { id: c, route: solo, prompt: "three", depends_on: [b] }
`

// following is an enqueue command run in the background.
type following struct {
	out, err *testenv.Buffer
	code     chan int
}

func startFollow(vars map[string]string, args ...string) following {
	f := following{out: &testenv.Buffer{}, err: &testenv.Buffer{}, code: make(chan int, 1)}
	env := cli.Env{Out: f.out, Err: f.err, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	go func() { f.code <- cli.Run(cli.Enqueue(env), env, args) }()
	return f
}

// holdOutage keeps an outage begun at since until it has lasted d,
// failing the test if the command ends meanwhile.
func (f following) holdOutage(t *testing.T, since time.Time, d time.Duration) {
	t.Helper()
	select {
	case c := <-f.code:
		t.Fatalf("follow exited %d during the outage; stderr %q, stdout:\n%s", c, f.err.String(), f.out.String())
	case <-time.After(time.Until(since.Add(d))):
	}
}

// exit waits for the command's exit code.
func (f following) exit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case c := <-f.code:
		return c
	case <-time.After(limit):
		t.Fatalf("follow did not end within %s; stderr %q, stdout:\n%s", limit, f.err.String(), f.out.String())
		return -1
	}
}

// jsonEvents parses follow --json's output.
func jsonEvents(t *testing.T, out string) []record.Event {
	t.Helper()
	var evs []record.Event
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var e record.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("follow --json printed %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

// idLines are events as "id type step", to compare a reader's with the log.
func idLines(evs []record.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID + " " + e.Type + " " + e.Step
	}
	return out
}

// sameAsTheLog checks that follow printed the workflow's whole log, each
// event once, in order, through workflow.ended.
func sameAsTheLog(t *testing.T, e *testenv.Env, id string, printed []record.Event) {
	t.Helper()
	log, err := e.Store.Events(t.Context(), id, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := idLines(printed), idLines(log); !slices.Equal(got, want) {
		t.Fatalf("follow printed:\n  %s\nthe log:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if n := len(log); n == 0 || log[n-1].Type != record.EventEnded {
		t.Fatalf("the log does not end with workflow.ended: %v", idLines(log))
	}
}

// followAcrossAnOutage runs follow --json (args) on workflow id, which
// waits for a worker, until it printed the first step.ready; then runs
// stop, holds the outage for hold (at least until follow said it
// reconnects), runs start and a worker, and checks that follow printed
// the workflow's whole log, each event once, in order, through
// workflow.ended, exited 0, and said once that it reconnects and that it
// resumed.
func followAcrossAnOutage(t *testing.T, e *testenv.Env, id string, vars map[string]string, args []string, hold time.Duration, stop, start func()) {
	t.Helper()
	f := startFollow(vars, append(args, "follow", id, "--json")...) // --reconnect: 60s
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(f.out.String(), `"step.ready"`), fmt.Sprintf("follow printed %q, stderr %q", f.out.String(), f.err.String())
	})
	down := time.Now()
	stop()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(f.err.String(), "reconnecting"), fmt.Sprintf("no word of the outage: %q", f.err.String())
	})
	f.holdOutage(t, down, hold)
	start()
	e.StartWorker(t) // the rest of the workflow's events come after the outage
	if c := f.exit(t, 15*time.Second); c != 0 {
		t.Fatalf("follow: exit %d, stderr %q", c, f.err.String())
	}
	sameAsTheLog(t, e, id, jsonEvents(t, f.out.String()))
	if s := f.err.String(); strings.Count(s, "reconnecting for up to 1m0s (--reconnect)") != 1 || !strings.Contains(s, "reconnected; resuming after event ") {
		t.Fatalf("stderr %q: want one line saying it reconnects, and one that it resumed", s)
	}
}

// enqueue follow rides a Redis restart mid-stream, and exits 3 on one
// line when Redis stays away past --reconnect.
func TestFollowRidesARedisRestart(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "yes")
	srv.Start()
	e := testenv.Start(t, testenv.Options{NoWorker: true, RedisAddr: srv.Addr()})
	vars, cfg := envFor(t, e)
	vars["AGENTQ_REDIS_DIAL_TIMEOUT"] = "500ms"
	id := e.Submit(t, e.Spec(followChain))
	followAcrossAnOutage(t, e, id, vars, []string{"--config", cfg}, 2500*time.Millisecond, srv.Stop, srv.Start)

	// an outage past --reconnect: exit 3, one line saying so
	id = e.Submit(t, e.Spec(followChain))
	e.StopWorker(t)
	f := startFollow(vars, "--config", cfg, "follow", id, "--reconnect", "1s")
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(f.out.String(), "submitted"), fmt.Sprintf("follow printed %q", f.out.String())
	})
	srv.Stop()
	if c := f.exit(t, 15*time.Second); c != 3 || strings.Count(f.err.String(), "enqueue: ") != 1 || !strings.Contains(f.err.String(), "no answer for 1s (--reconnect)") ||
		!strings.Contains(f.err.String(), "enqueue follow "+id+" --after ") {
		t.Fatalf("exit %d, stderr %q; want 3 naming --reconnect and how to resume, on one line", c, f.err.String())
	}
}

// a dashboard whose HTTP server a test stops and starts again on the same
// address.
type restartable struct {
	h    http.Handler
	addr string
	hs   *http.Server
	done chan struct{}
}

func (r *restartable) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.hs, r.done = &http.Server{Handler: r.h}, make(chan struct{})
	go func() {
		defer close(r.done)
		if err := r.hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("dashboard: %v", err)
		}
	}()
}

func (r *restartable) stop() {
	r.hs.Close()
	<-r.done
}

// startDashboard serves a dashboard over e's Redis until the test ends.
func startDashboard(t *testing.T, e *testenv.Env) *restartable {
	t.Helper()
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	d := &restartable{h: srv, addr: "127.0.0.1:0"}
	d.start(t)
	t.Cleanup(func() { d.stop(); srv.Close() })
	return d
}

// enqueue follow --server rides the dashboard restarting mid-stream, as
// it rides Redis.
func TestFollowThroughTheDashboardRidesItsRestart(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	d := startDashboard(t, e)
	id := e.Submit(t, e.Spec(followChain))
	vars := map[string]string{"AGENTQ_SERVER": "http://" + d.addr, "AGENTQ_REDIS_ADDR": "127.0.0.1:1"}
	followAcrossAnOutage(t, e, id, vars, nil, 4*time.Second, d.stop, func() { d.start(t) })
}

// enqueue follow --server rides the dashboard's Redis restarting
// mid-stream (the stream's error event, then the API's 503s).
func TestFollowThroughTheDashboardRidesItsRedisRestart(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "yes")
	srv.Start()
	e := testenv.Start(t, testenv.Options{NoWorker: true, RedisAddr: srv.Addr()})
	d := startDashboard(t, e)
	id := e.Submit(t, e.Spec(followChain))
	vars := map[string]string{"AGENTQ_SERVER": "http://" + d.addr, "AGENTQ_REDIS_ADDR": "127.0.0.1:1"}
	followAcrossAnOutage(t, e, id, vars, nil, 2500*time.Millisecond, srv.Stop, srv.Start)
}

// a map whose instance 2 is dead-lettered (the map is optional), and a
// step after it that fails when the input says so
const optionalMap = `name: optmap
input: { fail: "no" }
steps:
  - { id: plan, run: plan }
  - id: m
    depends_on: [plan]
    for_each: "{{ .Steps.plan.JSON.items }}"
    run: item
    optional: true
  - { id: after, depends_on: [m], run: after, with: { fail: "{{ .Input.fail }}" } }
`

// follow of a finished workflow with a dead optional map instance prints
// every event through workflow.ended and exits by the workflow's state
// (it used to stop at the instance's step.dead); of a workflow blocked
// on a later step, it prints through that step's step.dead.
func TestFollowReadsPastADeadOptionalInstance(t *testing.T) {
	steps := map[string]engine.StepFunc{
		"plan": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return map[string]any{"items": []int{0, 1, 2, 3}}, nil
		},
		"item": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			if s.Index() == 2 {
				return nil, engine.ToDeadLetter(errors.New("no data for item 2"))
			}
			return s.Index(), nil
		},
		"after": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a struct{ Fail string }
			if err := s.Args(&a); err != nil {
				return nil, err
			}
			if a.Fail == "yes" {
				return nil, engine.ToDeadLetter(errors.New("told to fail"))
			}
			return "ok", nil
		},
	}
	e := testenv.Start(t, testenv.Options{Steps: steps})
	vars, cfg := envFor(t, e)

	id := e.Submit(t, e.Spec(optionalMap))
	e.Wait(t, id, 15*time.Second, record.StateCompleted)
	r := run(t, cli.Enqueue, vars, "--config", cfg, "follow", id, "--json")
	if r.code != 0 {
		t.Fatalf("follow --json: exit %d, %q", r.code, r.err)
	}
	printed := jsonEvents(t, r.out)
	if !slices.ContainsFunc(printed, func(e record.Event) bool { return e.Type == record.EventDead && e.Step == "m[2]" }) {
		t.Fatalf("no step.dead of m[2]: %v", idLines(printed))
	}
	sameAsTheLog(t, e, id, printed)
	r = run(t, cli.Enqueue, vars, "--config", cfg, "follow", id)
	if lines := strings.Split(strings.TrimSpace(r.out), "\n"); r.code != 0 || !strings.Contains(r.out, "m[2] dead-lettered: handler: no data for item 2") ||
		!strings.HasSuffix(lines[len(lines)-1], "workflow completed") {
		t.Fatalf("follow: exit %d\n%s%s", r.code, r.out, r.err)
	}

	// blocked on a later step: through that step's step.dead, exit 1
	spec := e.Spec(optionalMap)
	spec.Input["fail"] = "yes"
	id = e.Submit(t, spec)
	e.Wait(t, id, 15*time.Second, record.StateBlocked)
	r = run(t, cli.Enqueue, vars, "--config", cfg, "follow", id, "--json")
	if r.code != 1 {
		t.Fatalf("follow --json of the blocked workflow: exit %d, %q", r.code, r.err)
	}
	printed = jsonEvents(t, r.out)
	log, err := e.Store.Events(t.Context(), id, "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := idLines(printed), idLines(log); !slices.Equal(got, want) || want[len(want)-1] != log[len(log)-1].ID+" step.dead after" {
		t.Fatalf("follow printed:\n  %s\nthe log:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
