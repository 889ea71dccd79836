package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/worker"
)

// agentqSide runs the scenario on real agentq workers.
type agentqSide struct {
	sc       *Scenario
	db       redistest.DB
	rdb      *redis.Client
	chaos    *chaosSet
	cfg      config.Config
	rec      recorder
	client   *producer.Client
	spec     *spec.Spec
	stopW    func()
	werrs    chan error
	mu       sync.Mutex
	ids      []string
	subAt    map[string]time.Time
	brMu     sync.Mutex
	open     map[string]*interval // target -> its current not-closed stretch
	opened   map[string][]interval
	stopBr   func()
	cooldown time.Duration
}

func (a *agentqSide) name() string { return "agentq" }

// agentqConfig writes the agentq.yaml a user would: one provider per
// chaosllm, route "drill", the scenario's resilience section.
func agentqConfig(sc *Scenario, urls map[string]string, db redistest.DB) (config.Config, error) {
	var provs []map[string]any
	for _, p := range sc.Providers {
		t := p.Timeout
		if t == "" {
			t = "10s"
		}
		provs = append(provs, map[string]any{"name": p.Name, "kind": "openai", "base_url": urls[p.Name] + "/v1", "keys": p.Keys, "timeout": t})
	}
	doc := map[string]any{"providers": provs, "routes": map[string]any{"drill": &sc.Route},
		"worker": map[string]any{"concurrency": sc.Concurrency, "queues": map[string]int{"default": 1}},
		"redis":  map[string]any{"addr": db.Addr, "db": db.DB}, "retention": "2h"}
	if sc.Resilience.Kind != 0 {
		doc["resilience"] = &sc.Resilience
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return config.Config{}, err
	}
	return config.Load(config.Input{Path: sc.Name + " (agentq.yaml)", Data: b,
		LookupEnv: func(string) (string, bool) { return "", false }})
}

func (a *agentqSide) prepare(ctx context.Context) error {
	var err error
	if a.chaos, err = startChaos(ctx, a.sc.Providers); err != nil {
		return err
	}
	if a.cfg, err = agentqConfig(a.sc, a.chaos.urls, a.db); err != nil {
		return err
	}
	a.cooldown = a.cfg.Resilience.Breaker.Cooldown.D()
	a.client = producer.NewClient(a.rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: 2 * time.Hour, Routes: []string{"drill"}})
	wf, err := yaml.Marshal(&a.sc.Workflow)
	if err != nil {
		return err
	}
	if a.spec, err = a.client.Parse(a.sc.Name+" workflow", wf); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	a.werrs = make(chan error, a.sc.Workers)
	var ready sync.WaitGroup
	for i := 0; i < a.sc.Workers; i++ {
		ready.Add(1)
		var once sync.Once
		go func() {
			a.werrs <- worker.Run(wctx, worker.Options{Config: a.cfg, Logger: slog.New(slog.DiscardHandler),
				Observer: &a.rec, TaskCheckInterval: 200 * time.Millisecond,
				Ready: func() { once.Do(ready.Done) }})
		}()
	}
	waited := make(chan struct{})
	go func() { ready.Wait(); close(waited) }()
	select {
	case <-waited:
	case err := <-a.werrs:
		cancel()
		return fmt.Errorf("worker: %w", err)
	}
	a.stopW = func() {
		cancel()
		for i := 0; i < a.sc.Workers; i++ {
			<-a.werrs
		}
	}
	a.subAt = map[string]time.Time{}
	a.open, a.opened = map[string]*interval{}, map[string][]interval{}
	return nil
}

func (a *agentqSide) begin(ctx context.Context) error {
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	a.stopBr = func() { cancel(); <-done }
	go func() { defer close(done); a.watchBreakers(bctx) }()
	return a.chaos.begin(a.sc.Providers)
}

// watchBreakers reads the shared breaker states whenever a worker
// announces a change (and every 50ms besides) and keeps the stretches each
// target spent open or half-open.
func (a *agentqSide) watchBreakers(ctx context.Context) {
	br := store.NewBreakers(a.rdb)
	var names []string
	for _, p := range a.sc.Providers {
		names = append(names, p.Name)
	}
	poke := make(chan struct{}, 1)
	_ = store.Subscribe(ctx, a.rdb, func(string, string) {
		select {
		case poke <- struct{}{}:
		default:
		}
	}, store.BreakerChanges)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		states, err := br.Load(ctx, names)
		now := time.Now()
		if err == nil {
			a.brMu.Lock()
			for prov, models := range states {
				for model, b := range models {
					key := prov + "/" + model
					cur := a.open[key]
					switch {
					case b.State != breaker.Closed && cur == nil:
						a.open[key] = &interval{From: now}
					case b.State == breaker.Closed && cur != nil:
						cur.To = now
						a.opened[key] = append(a.opened[key], *cur)
						delete(a.open, key)
					}
				}
			}
			a.brMu.Unlock()
		}
		select {
		case <-ctx.Done():
			a.brMu.Lock()
			for key, cur := range a.open {
				cur.To = now
				a.opened[key] = append(a.opened[key], *cur)
			}
			a.open = map[string]*interval{}
			a.brMu.Unlock()
			return
		case <-t.C:
		case <-poke:
		}
	}
}

func (a *agentqSide) submit(ctx context.Context, n int) error {
	wspec := *a.spec
	wspec.Input = map[string]any{"n": n}
	at := time.Now()
	id, err := a.client.Submit(ctx, &wspec)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.ids = append(a.ids, id)
	a.subAt[id] = at
	a.mu.Unlock()
	return nil
}

func (a *agentqSide) pending(ctx context.Context) (int, error) {
	n := 0
	for _, id := range a.ids {
		wf, err := a.client.Status(ctx, id)
		if err != nil {
			return 0, err
		}
		if !store.Terminal(wf.State) && wf.State != store.StateBlocked {
			n++
		}
	}
	return n, nil
}

func (a *agentqSide) collect(ctx context.Context) (*result, error) {
	a.stopBr()
	r := &result{Name: "agentq", breakers: a.opened, cooldown: a.cooldown}
	insp := asynq.NewInspectorFromRedisClient(a.rdb)
	queued := 0
	if qs, err := insp.Queues(); err == nil {
		for _, q := range qs {
			if info, err := insp.GetQueueInfo(q); err == nil {
				queued += info.Pending + info.Active + info.Scheduled + info.Retry
			}
		}
	}
	for _, id := range a.ids {
		wf, err := a.client.Status(ctx, id)
		o := outcome{ID: id, Submitted: a.subAt[id]}
		switch {
		case err != nil:
			o.State, o.Reason = "lost", err.Error()
		default:
			o.State = stateOf(wf)
			if wf.FinishedAt != nil {
				o.Finished = *wf.FinishedAt
			}
			if o.State == "unfinished" && queued == 0 {
				o.State, o.Reason = "lost", "not finished and nothing queued"
			}
			for _, s := range wf.Steps {
				if s.State == store.StepDead && o.Reason == "" {
					o.Reason = s.Error
				}
			}
		}
		r.outcomes = append(r.outcomes, o)
	}
	r.calls = a.rec.all()
	r.fallbacks = a.rec.fallbacks
	r.failedCalls, r.failedTokens = a.chaos.failedTokens()
	return r, nil
}

// stateOf sorts a workflow: completed, degraded (completed with a
// degraded or dropped optional step), dead_lettered, canceled, unfinished.
func stateOf(wf *producer.Workflow) string {
	switch wf.State {
	case store.StateCompleted:
		for _, s := range wf.Steps {
			if s.Degraded || s.State == store.StepDead {
				return "degraded"
			}
		}
		return "completed"
	case store.StateFailed, store.StateBlocked:
		return "dead_lettered"
	case store.StateCanceled:
		return "canceled"
	}
	return "unfinished"
}

func (a *agentqSide) close() {
	if a.stopW != nil {
		a.stopW()
	}
	if a.chaos != nil {
		a.chaos.stop()
	}
}

// primary is the route's first target, provider/model.
func (a *agentqSide) primary() string {
	if r, ok := a.cfg.Routes["drill"]; ok && len(r.Targets) > 0 {
		return r.Targets[0].Provider + "/" + r.Targets[0].Model
	}
	return ""
}
