package main

import (
	"context"
	"fmt"
	"net"

	"github.com/agentq/agentq/internal/chaosllm"
)

// chaosSet is one chaosllm per provider, each on its own port so that a
// refusing provider closes only its own listener.
type chaosSet struct {
	servers map[string]*chaosllm.Server
	urls    map[string]string
	stop    func()
}

// startChaos serves every provider healthy until begin puts each on its
// scenario's timeline.
func startChaos(ctx context.Context, providers []Provider) (*chaosSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	cs := &chaosSet{servers: map[string]*chaosllm.Server{}, urls: map[string]string{}}
	var dones []chan error
	cs.stop = func() {
		cancel()
		for _, d := range dones {
			<-d
		}
	}
	for _, p := range providers {
		srv, err := chaosllm.New(chaosllm.Scenario{}, chaosllm.Options{})
		if err != nil {
			cs.stop()
			return nil, err
		}
		addrc, done := make(chan net.Addr, 1), make(chan error, 1)
		go func() { done <- chaosllm.Serve(ctx, "127.0.0.1:0", srv, func(a net.Addr) { addrc <- a }) }()
		select {
		case a := <-addrc:
			dones = append(dones, done)
			cs.urls[p.Name] = "http://" + a.String()
		case err := <-done:
			cs.stop()
			return nil, fmt.Errorf("chaosllm for %s: %w", p.Name, err)
		}
		cs.servers[p.Name] = srv
	}
	return cs, nil
}

// begin starts every provider's timeline now.
func (cs *chaosSet) begin(providers []Provider) error {
	for _, p := range providers {
		if err := cs.servers[p.Name].SetScenario(p.chaos); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return nil
}

// failedTokens sums the prompt tokens the providers received on chat
// calls that did not end in an answer.
func (cs *chaosSet) failedTokens() (calls, tokens int) {
	for _, srv := range cs.servers {
		for _, l := range srv.Snapshot().Calls {
			if l.Outcome != "ok" && l.Endpoint != "models" {
				calls += l.Count
				tokens += l.PromptTokens
			}
		}
	}
	return calls, tokens
}
