package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// DefaultAdvertiseInterval is how often a worker renews its advertisement;
// it lapses after three intervals without one (a killed worker).
const DefaultAdvertiseInterval = 10 * time.Second

// newWorkerID names this worker process: host, pid and a random part
// (a restarted pod on the same host is another worker).
func newWorkerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// advertisement builds what this worker serves from its options and the
// queues its asynq server serves (the configured ones, and the webhooks
// queue when it delivers webhooks).
func advertisement(o Options, id string, served map[string]int, shards map[string][]int) store.WorkerAd {
	queues := maps.Clone(served)
	if queues == nil {
		queues = map[string]int{}
	}
	handlers := slices.Sorted(maps.Keys(o.Steps))
	if handlers == nil {
		handlers = []string{}
	}
	tools := slices.Sorted(maps.Keys(o.Tools))
	for _, name := range o.Config.MCPServerNames() { // every tool of the server: mcp:NAME
		tools = append(tools, spec.MCPPrefix+name)
	}
	if tools == nil {
		tools = []string{}
	}
	keys := app.AdKeys(o.Config)
	if keys == nil {
		keys = []store.AdKey{}
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	return store.WorkerAd{
		ID:      id,
		Shards:  shards,
		Version: buildVersion(),
		Queues:  queues, Routes: o.Config.RouteNames(), Handlers: handlers,
		Tools: tools,
		Keys:  keys, StartedAt: now().UTC(),
	}
}

// buildVersion is the module's version when built from a tagged module,
// else the VCS revision it was built from, else "".
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// advertiser keeps a worker's advertisement alive until stopped.
type advertiser struct {
	fleet    *store.Fleet
	ad       store.WorkerAd
	interval time.Duration
	log      *slog.Logger
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once
	failing  atomic.Bool // the last renewal failed
}

// current reports whether the advertisement's last write succeeded.
func (a *advertiser) current() bool { return !a.failing.Load() }

// advertise writes the worker's advertisement of the queues it serves (an
// error if it cannot), then renews it every interval (0:
// DefaultAdvertiseInterval) with a TTL of three intervals until stop.
func advertise(ctx context.Context, rdb redis.UniversalClient, o Options, id string, served map[string]int, shards map[string][]int, interval time.Duration) (*advertiser, error) {
	if interval <= 0 {
		interval = DefaultAdvertiseInterval
	}
	a := &advertiser{fleet: store.NewFleet(rdb, o.Now), ad: advertisement(o, id, served, shards), interval: interval, log: o.Logger, done: make(chan struct{})}
	if err := a.fleet.Advertise(ctx, a.ad, 3*interval); err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	go a.run(bg)
	return a, nil
}

// readvertiseDelay bounds how long a worker whose renewal failed (Redis
// away) waits before it tries again: it advertises again within this
// long of Redis answering, not at its next interval, so an outage longer
// than the advertisement's TTL does not leave submits refused "no live
// worker" while the worker runs.
const readvertiseDelay = time.Second

func (a *advertiser) run(ctx context.Context) {
	defer close(a.done)
	t := time.NewTimer(a.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := a.fleet.Advertise(ctx, a.ad, 3*a.interval)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !a.failing.Swap(true) {
				a.log.Warn("could not renew the worker's advertisement; submits may not see this worker; trying again every second", "worker", a.ad.ID, "err", err)
			}
			t.Reset(min(a.interval, readvertiseDelay))
		default:
			if a.failing.Swap(false) {
				a.log.Info("worker advertised again", "worker", a.ad.ID)
			}
			t.Reset(a.interval)
		}
	}
}

// stop ends the heartbeat and removes the advertisement. It may be called
// more than once.
func (a *advertiser) stop(ctx context.Context) {
	a.once.Do(func() {
		a.cancel()
		<-a.done
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := a.fleet.Withdraw(wctx, a.ad.ID); err != nil {
			a.log.Warn("could not remove the worker's advertisement; it lapses by itself", "worker", a.ad.ID, "err", err)
		}
	})
}
