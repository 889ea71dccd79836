package engine

import (
	"time"
)

// A step's attempt runs on a goroutine of its own (so that its slot can
// give up on it at its deadline). A new goroutine starts with a small
// stack, and a step's call path (the router, an HTTP client, Redis, JSON)
// grows it several times over, each time copying it: at thousands of
// steps a second that copying was about a tenth of a worker's CPU. The
// attempts run instead on goroutines kept after they finish, whose stacks
// have grown already; a goroutine no attempt used for stepGoIdle ends.

// stepGoIdle is how long a kept goroutine waits for another attempt.
const stepGoIdle = 5 * time.Second

// stepGoroutines hands functions to kept goroutines waiting for one.
var stepGoroutines = make(chan func())

// goPooled runs f as `go f()` would, on a kept goroutine if one waits.
// A kept goroutine runs under the profiler labels (runtime/pprof) of the
// goroutine that started it, as any goroutine does: a step's context
// carries none (asynq's is its own).
func goPooled(f func()) {
	select {
	case stepGoroutines <- f:
	default:
		go servePooled(f)
	}
}

// servePooled runs f, then whatever is handed to it, until it waited
// stepGoIdle for nothing.
func servePooled(f func()) {
	idle := time.NewTimer(stepGoIdle)
	defer idle.Stop()
	for {
		f()
		f = nil
		idle.Reset(stepGoIdle)
		select {
		case f = <-stepGoroutines:
		case <-idle.C:
			return
		}
	}
}
