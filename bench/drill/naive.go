package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentq/agentq/internal/spec"
)

// naiveSide is the baseline many agent codebases start with: call one
// provider, on any error wait 1s, 2s, 4s and try again (three retries),
// no breaker, no key rotation, no fallback; a step that still fails fails
// its workflow. Workflows run in goroutines, Workers×Concurrency at a
// time, steps of a workflow as soon as their dependencies are done.
type naiveSide struct {
	sc      *Scenario
	ctx     context.Context // canceled by close: workflows still running stop
	cancel  context.CancelFunc
	chaos   *chaosSet
	client  *openai.Client
	target  string
	model   string
	timeout time.Duration
	steps   []spec.Step
	sem     chan struct{}
	wg      sync.WaitGroup
	rec     recorder
	mu      sync.Mutex
	out     []*outcome
}

func (n *naiveSide) name() string { return "naive" }

func (n *naiveSide) prepare(ctx context.Context) error {
	var route struct {
		Targets []struct{ Provider, Model string } `yaml:"targets"`
	}
	if err := n.sc.Route.Decode(&route); err != nil || len(route.Targets) == 0 {
		return fmt.Errorf("route: no targets for the naive baseline (%v)", err)
	}
	n.target, n.model = route.Targets[0].Provider, route.Targets[0].Model
	if n.sc.Naive.Provider != "" {
		n.target, n.model = n.sc.Naive.Provider, n.sc.Naive.Model
	}
	n.ctx, n.cancel = context.WithCancel(ctx)
	var err error
	if n.chaos, err = startChaos(ctx, n.sc.Providers); err != nil {
		return err
	}
	n.timeout = 10 * time.Second
	var key string
	for _, p := range n.sc.Providers {
		if p.Name == n.target {
			key = p.Keys[0]
			if p.Timeout != "" {
				if n.timeout, err = time.ParseDuration(p.Timeout); err != nil {
					return fmt.Errorf("providers (%s).timeout: %w", p.Name, err)
				}
			}
		}
	}
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = n.chaos.urls[n.target] + "/v1"
	n.client = openai.NewClientWithConfig(cfg)
	var wspec spec.Spec
	if err := n.sc.Workflow.Decode(&wspec); err != nil {
		return err
	}
	n.steps = wspec.Steps
	n.sem = make(chan struct{}, n.sc.Workers*n.sc.Concurrency)
	return nil
}

func (n *naiveSide) begin(context.Context) error { return n.chaos.begin(n.sc.Providers) }

func (n *naiveSide) submit(_ context.Context, i int) error {
	ctx := n.ctx
	o := &outcome{ID: fmt.Sprintf("naive-%d", i), Submitted: time.Now(), State: "unfinished"}
	n.mu.Lock()
	n.out = append(n.out, o)
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		select {
		case n.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-n.sem }()
		err := n.workflow(ctx, i)
		n.mu.Lock()
		defer n.mu.Unlock()
		o.Finished = time.Now()
		if err != nil {
			o.State, o.Reason = "failed", naiveClass(err)+": "+err.Error()
		} else {
			o.State = "completed"
		}
	}()
	return nil
}

// workflow runs the steps in waves: every step whose dependencies are done.
func (n *naiveSide) workflow(ctx context.Context, i int) error {
	done := map[string]bool{}
	for len(done) < len(n.steps) {
		var wave []spec.Step
		for _, s := range n.steps {
			if done[s.ID] {
				continue
			}
			ready := true
			for _, d := range s.DependsOn {
				ready = ready && done[d]
			}
			if ready {
				wave = append(wave, s)
			}
		}
		if len(wave) == 0 {
			return errors.New("dependency cycle")
		}
		errs := make(chan error, len(wave))
		for _, s := range wave {
			go func() { errs <- n.step(ctx, fmt.Sprintf("workflow %d step %s: %s", i, s.ID, s.Prompt)) }()
		}
		var first error
		for range wave {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return first
		}
		for _, s := range wave {
			done[s.ID] = true
		}
	}
	return nil
}

func (n *naiveSide) step(ctx context.Context, prompt string) error {
	var err error
	for attempt := 0; attempt <= 3; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Second << (attempt - 1)):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		cctx, cancel := context.WithTimeout(ctx, n.timeout)
		start := time.Now()
		_, err = n.client.CreateChatCompletion(cctx, openai.ChatCompletionRequest{Model: n.model,
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: prompt}}})
		cancel()
		n.rec.add(call{Start: start, Dur: time.Since(start), Target: n.target + "/" + n.model, Class: naiveClass(err)})
		if err == nil {
			return nil
		}
	}
	return err
}

func naiveClass(err error) string {
	var api *openai.APIError
	var req *openai.RequestError
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &api):
		return fmt.Sprintf("status_%d", api.HTTPStatusCode)
	case errors.As(err, &req):
		return fmt.Sprintf("status_%d", req.HTTPStatusCode)
	case errors.As(err, &ne):
		return "network"
	}
	return "error"
}

func (n *naiveSide) pending(context.Context) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, o := range n.out {
		if o.State == "unfinished" {
			k++
		}
	}
	return k, nil
}

func (n *naiveSide) collect(context.Context) (*result, error) {
	r := &result{Name: "naive"}
	n.mu.Lock()
	for _, o := range n.out {
		r.outcomes = append(r.outcomes, *o)
	}
	n.mu.Unlock()
	r.calls = n.rec.all()
	r.failedCalls, r.failedTokens = n.chaos.failedTokens()
	return r, nil
}

func (n *naiveSide) close() {
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
	if n.chaos != nil {
		n.chaos.stop()
	}
}
