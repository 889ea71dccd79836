package router

import (
	"time"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/retry"
)

// Observer hears about every call the router makes; metrics hang here.
// The zero value of RouterOptions uses a no-op observer.
type Observer interface {
	Call(route string, t Target, key string, class retry.Class, dur time.Duration, usage llmclient.Usage)
	Fallback(route, from, to string)
	// KeyEvent reports "cooldown", "disabled" or "rotated" (the next key
	// was tried) for a key named by its fingerprint.
	KeyEvent(provider, key, event string)
}

type nopObserver struct{}

func (nopObserver) Call(string, Target, string, retry.Class, time.Duration, llmclient.Usage) {}

func (nopObserver) Fallback(string, string, string) {}

func (nopObserver) KeyEvent(string, string, string) {}
