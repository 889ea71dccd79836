// Package embedded runs, inside one process, what an agentq worker needs
// around it for a demo or a first try: an in-memory Redis (miniredis) and
// chaosllm, a fake LLM provider that speaks the OpenAI and Anthropic wire
// formats and follows a scripted outage. Nothing leaves the machine and no
// API key is needed. It is not for production: the Redis keeps nothing.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
)

// Options says what to run. Config is an agentq.yaml in which
// ${PROVIDER_URL} is chaosllm's base URL (append /v1 for an OpenAI-style
// provider) and ${DEAD_URL} a loopback URL that refuses connections (a
// provider that is down); Scenario is chaosllm's script (YAML): its
// phases, faults and tool_script.
type Options struct {
	Config   []byte
	Scenario []byte
	Logger   *slog.Logger // chaosllm's log; nil: discarded
}

// Env is a running embedded environment. Close it when done.
type Env struct {
	// Config is Options.Config with the URLs filled in and Redis pointed
	// at the in-memory one.
	Config agentq.Config
	// RedisAddr is the in-memory Redis; ProviderURL is chaosllm's base.
	RedisAddr, ProviderURL string

	chaos *chaosllm.Server
	mr    *miniredis.Miniredis
	hs    *http.Server
	stop  context.CancelFunc
}

// Start runs the in-memory Redis and chaosllm and loads the configuration.
func Start(ctx context.Context, o Options) (*Env, error) {
	sc, err := chaosllm.ParseScenario(o.Scenario)
	if err != nil {
		return nil, fmt.Errorf("embedded: scenario: %w", err)
	}
	chaos, err := chaosllm.New(sc, chaosllm.Options{Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("embedded: scenario: %w", err)
	}
	e := &Env{chaos: chaos, mr: miniredis.NewMiniRedis()}
	if err := e.mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded: redis: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.mr.Close()
		return nil, fmt.Errorf("embedded: chaosllm: %w", err)
	}
	e.hs = &http.Server{Handler: chaos, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.hs.Serve(ln) }()
	var bg context.Context
	bg, e.stop = context.WithCancel(context.WithoutCancel(ctx))
	go fastForward(bg, e.mr, time.Second) // miniredis expires keys only when told time has passed
	dead, err := refusedURL()
	if err != nil {
		e.Close()
		return nil, err
	}
	e.RedisAddr, e.ProviderURL = e.mr.Addr(), "http://"+ln.Addr().String()
	vars := map[string]string{"PROVIDER_URL": e.ProviderURL, "DEAD_URL": dead, "AGENTQ_REDIS_ADDR": e.RedisAddr}
	e.Config, err = agentq.ParseConfigWith("embedded agentq.yaml", o.Config, func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// ProviderCalls is how many requests chaosllm answered so far, by outcome
// ("ok", "status_503", "refused", …) summed over endpoints and keys.
func (e *Env) ProviderCalls() map[string]int {
	out := map[string]int{}
	for _, c := range e.chaos.Snapshot().Calls {
		out[c.Outcome] += c.Count
	}
	return out
}

// Close stops chaosllm and the in-memory Redis.
func (e *Env) Close() error {
	if e.stop != nil {
		e.stop()
	}
	var err error
	if e.hs != nil {
		err = e.hs.Close()
	}
	e.mr.Close()
	return err
}

func fastForward(ctx context.Context, mr *miniredis.Miniredis, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			mr.FastForward(every)
		}
	}
}

// refusedURL is an http URL on a loopback port nothing listens on.
func refusedURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return "", err
	}
	return "http://" + addr, nil
}
