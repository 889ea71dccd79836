package main

import (
	"sync"
	"time"

	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// call is one LLM call as the caller saw it.
type call struct {
	Start  time.Time
	Dur    time.Duration
	Target string // provider/model
	Class  string // retry class; "ok" for an answer
}

// recorder is an router.Observer keeping every call.
type recorder struct {
	mu        sync.Mutex
	calls     []call
	fallbacks int
}

func (r *recorder) Call(_ string, t router.Target, _ string, class retry.Class, dur time.Duration, _ llmclient.Usage) {
	r.add(call{Start: time.Now().Add(-dur), Dur: dur, Target: t.String(), Class: string(class)})
}

func (r *recorder) Fallback(string, string, string) {
	r.mu.Lock()
	r.fallbacks++
	r.mu.Unlock()
}

func (r *recorder) KeyEvent(string, string, string) {}

func (r *recorder) add(c call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// interval is a stretch of time a target's breaker was not closed.
type interval struct{ From, To time.Time }

// outcome of one workflow.
type outcome struct {
	ID        string
	Submitted time.Time
	Finished  time.Time
	State     string // completed, degraded, dead_lettered, canceled, unfinished, lost
	Reason    string
}
