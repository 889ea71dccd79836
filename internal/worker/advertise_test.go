package worker_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
)

// childEnv makes this test binary run as a worker process.
const childEnv = "AGENTQ_TEST_ADVERTISING_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		child()
		return
	}
	os.Exit(redistest.Main(m))
}

// child runs a worker that renews its advertisement every 100ms, until
// SIGTERM or SIGKILL.
func child() {
	var db redistest.DB
	db.Addr = os.Getenv(childEnv + "_REDIS")
	db.DB, _ = strconv.Atoi(os.Getenv(childEnv + "_DB"))
	cfg, err := testenv.Config("http://127.0.0.1:1", db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = worker.Run(ctx, worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), ReconcileInterval: -1,
		AdvertiseInterval: 100 * time.Millisecond, Ready: func() { fmt.Println("ready") }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

func live(t *testing.T, f *store.Fleet) []store.WorkerAd {
	t.Helper()
	ads, err := f.Live(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ads
}

// A running worker advertises its queues, routes, code steps and keys (by
// fingerprint and id, never the key) from its start, and takes the
// advertisement away when it stops gracefully: at once, long before the
// advertisement would lapse.
func TestWorkerAdvertisesWhatItServesUntilItStops(t *testing.T) {
	db, rdb := redistest.New(t)
	cfg, err := testenv.Config("http://127.0.0.1:1", db)
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *engine.CodeStep) (any, error) { return nil, nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Redis: rdb, ReconcileInterval: -1,
			AdvertiseInterval: time.Hour, Steps: map[string]engine.StepFunc{"summarize": noop, "fetch": noop},
			Ready: func() { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not start within 10s")
	}
	f := store.NewFleet(rdb, nil)
	ads := live(t, f)
	if len(ads) != 1 {
		t.Fatalf("%d advertisements, want 1", len(ads))
	}
	ad := ads[0]
	if !strings.Contains(ad.ID, "-"+strconv.Itoa(os.Getpid())+"-") || ad.Queues["default"] != 1 || len(ad.Queues) != 1 ||
		!slices.Equal(ad.Routes, cfg.RouteNames()) || !slices.Equal(ad.Handlers, []string{"fetch", "summarize"}) || ad.Tools == nil {
		t.Fatalf("advertisement %+v", ad)
	}
	var fps []string
	for _, k := range ad.Keys {
		fps = append(fps, k.Fingerprint)
		if k.ID == "" {
			t.Errorf("key %s has no id", k.Fingerprint)
		}
	}
	if s := strings.Join(fps, " "); !strings.HasPrefix(s, "oa#1 (…") || !strings.Contains(s, "oa#2 (…") || !strings.Contains(s, "an#1 (…") {
		t.Fatalf("key fingerprints %q", s)
	}
	raw := rdb.Get(context.Background(), "agentq:{workers}:"+ad.ID).Val()
	for _, k := range testenv.Keys {
		if strings.Contains(raw, k) {
			t.Fatalf("the advertisement holds an API key: %s", raw)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ads := live(t, f); len(ads) != 0 {
		t.Fatalf("after a graceful stop: %+v", ads)
	}
	if rdb.Exists(context.Background(), "agentq:{workers}:"+ad.ID).Val() != 0 {
		t.Fatal("the advertisement's key outlived the graceful stop")
	}
}

// A killed worker cannot take its advertisement away: it stays while the
// worker renews it, and lapses within its TTL (three intervals) after a
// SIGKILL.
func TestKilledWorkersAdvertisementLapses(t *testing.T) {
	db, rdb := redistest.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childEnv+"_REDIS="+db.Addr, childEnv+"_DB="+strconv.Itoa(db.DB))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				close(ready)
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("worker process exited: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("worker process not ready within 20s")
	}
	f := store.NewFleet(rdb, nil)
	mine := func() bool {
		for _, ad := range live(t, f) {
			if strings.Contains(ad.ID, "-"+strconv.Itoa(cmd.Process.Pid)+"-") {
				return true
			}
		}
		return false
	}
	// renewed: still there throughout 1s, over three times its 300ms TTL
	// (sampled over the window: a property that must hold, not a wait)
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if !mine() {
			t.Fatal("a running worker's advertisement lapsed")
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return !mine(), "a killed worker's advertisement is still live after the kill (TTL 300ms)"
	})
}

// cancelOnAdvertise cancels a context when the worker's advertisement is
// about to be written: the stop that arrives while a worker starts.
type cancelOnAdvertise struct{ cancel context.CancelFunc }

func (cancelOnAdvertise) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c cancelOnAdvertise) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.ContainsFunc(cmd.Args(), func(a any) bool { s, _ := a.(string); return s == "agentq:{workers}" }) {
			c.cancel()
		}
		return next(ctx, cmd)
	}
}
func (cancelOnAdvertise) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A worker told to stop while it starts (here: as it writes its
// advertisement, after its asynq server has started) stops cleanly: no
// error, no advertisement left behind, its asynq server gone.
func TestStopWhileStartingIsACleanStop(t *testing.T) {
	db, rdb := redistest.New(t)
	cfg, err := testenv.Config("http://127.0.0.1:1", db)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hooked := redis.NewClient(&redis.Options{Addr: db.Addr, DB: db.DB})
	defer hooked.Close()
	hooked.AddHook(cancelOnAdvertise{cancel})
	ready := false
	err = worker.Run(ctx, worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Redis: hooked, ReconcileInterval: -1,
		Ready: func() { ready = true }})
	if err != nil {
		t.Fatalf("a worker stopped while it started: %v, want a clean stop", err)
	}
	if ctx.Err() == nil || ready {
		t.Fatalf("the stop did not come while starting (canceled %v, ready %v)", ctx.Err(), ready)
	}
	if ads := live(t, store.NewFleet(rdb, nil)); len(ads) != 0 {
		t.Fatalf("advertisements left by a worker stopped while starting: %+v", ads)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		n := rdb.ZCard(context.Background(), "asynq:servers").Val()
		return n == 0, fmt.Sprintf("%d asynq servers still registered", n)
	})
}

// A worker that delivers webhooks advertises the webhooks queue it serves
// (queue list counted no worker for it); after Redis comes back from an
// outage that took its advertisement, the worker advertises again within
// a second of Redis answering, not at its next interval.
func TestWorkerAdvertisesAgainAsSoonAsRedisAnswers(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	srv.Start()
	db := redistest.DB{Addr: srv.Addr(), Kind: "redis-server"}
	rdb := redis.NewClient(db.Options())
	defer rdb.Close()
	cfg, err := testenv.Config("http://127.0.0.1:1", db)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks = config.Webhooks{Secret: config.Secret(strings.Repeat("s", 32)), Allow: []string{"127.0.0.1"}}
	var logs testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan struct{}), make(chan error, 1)
	const interval = 4 * time.Second
	go func() {
		done <- worker.Run(ctx, worker.Options{Config: cfg, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Redis: rdb, ReconcileInterval: -1,
			AdvertiseInterval: interval, Ready: func() { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker did not start: %v", err)
	}
	f := store.NewFleet(rdb, nil)
	ads := live(t, f)
	if len(ads) != 1 || ads[0].Queues["webhooks"] != 1 || ads[0].Queues["default"] != 1 {
		t.Fatalf("advertisements %+v, want one serving default and webhooks", ads)
	}
	srv.Stop() // no persistence: the advertisement is gone with the data
	poll.Until(t, 3*interval, func() (bool, string) {
		return strings.Contains(logs.String(), "could not renew"), "the worker did not notice Redis was away"
	})
	srv.Start()
	// well under the interval: the worker tries again every second
	poll.Until(t, interval/2, func() (bool, string) {
		ads, err := f.Live(context.Background())
		return err == nil && len(ads) == 1, fmt.Sprintf("advertisements %d (%v) after Redis came back", len(ads), err)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
