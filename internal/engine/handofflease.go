package engine

import (
	"context"
	"slices"
	"time"

	"github.com/agentq/agentq/internal/store"
)

// The running hand-offs' leases, asynq's cancels, and the stop.

// Run keeps the running hand-offs' leases and hears asynq's cancels until
// ctx ends; then Stop ends them.
func (ho *Handoffs) Run(ctx context.Context) {
	sub := ho.h.o.Redis.Subscribe(ctx, cancelChannel)
	defer func() { _ = sub.Close() }()
	// subscribed before the first hand-off, or a cancel published before
	// would be lost (Redis keeps no message); unconfirmed (Redis away),
	// the channel below subscribes when it is back
	if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		ho.h.o.Logger.Warn("hand-offs: asynq's cancel channel not heard yet", "err", err)
	}
	close(ho.listening)
	cancels := sub.Channel()
	tick := time.NewTicker(ho.o.LeaseEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-cancels:
			if ok {
				ho.cancelRun(m.Payload, context.Canceled)
			}
		case <-tick.C:
			ho.extendLeases(ctx)
		}
	}
}

// Listening is closed once Run hears asynq's cancels (or found Redis
// away): start serving after it.
func (ho *Handoffs) Listening() <-chan struct{} { return ho.listening }

// cancelChannel is where asynq's Inspector.CancelProcessing publishes a
// task id.
const cancelChannel = "asynq:cancel"

func (ho *Handoffs) cancelRun(id string, cause error) {
	ho.mu.Lock()
	defer ho.mu.Unlock()
	if r := ho.running[id]; r != nil {
		r.cancel(cause)
	}
}

// extendLeases extends every running hand-off's lease; one whose lease
// is gone, or lapsed while Redis did not answer, is stopped (asynq's
// recoverer has it back).
func (ho *Handoffs) extendLeases(ctx context.Context) {
	ho.mu.Lock()
	byQueue := map[string][]string{}
	for id, r := range ho.running {
		byQueue[r.t.Queue] = append(byQueue[r.t.Queue], id)
	}
	ho.mu.Unlock()
	now := ho.o.Now()
	until := now.Add(store.TaskLease)
	for q, ids := range byQueue {
		lctx, cancel := context.WithTimeout(ctx, settleTimeout)
		lost, err := ho.h.st.ExtendTaskLeases(lctx, q, ids, until)
		cancel()
		ho.mu.Lock()
		for _, id := range ids {
			r := ho.running[id]
			switch {
			case r == nil:
			case err == nil && !slices.Contains(lost, id):
				r.until = until
			case err == nil || now.After(r.until):
				r.cancel(errLeaseOff)
			}
		}
		ho.mu.Unlock()
	}
}

// Stop hands no more steps on, waits up to timeout for the running
// hand-offs to end, then stops them and puts their tasks back on their
// queues.
func (ho *Handoffs) Stop(timeout time.Duration) {
	ho.mu.Lock()
	ho.stopping = true
	ho.mu.Unlock()
	done := make(chan struct{})
	go func() { ho.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		ho.abort(errAborted)
		<-done
	}
}
