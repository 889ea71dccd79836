// Package schedule runs periodic workflows (the configuration's
// schedules:). Every replica that has schedules runs a Scheduler; for each
// schedule one of them holds its lease in Redis and submits one workflow
// per slot of its cron expression, with an idempotency key made of the
// schedule's name and the slot's time. A replica that takes a lease over
// (its holder stopped, or died and the lease expired) catches up the slots
// since the last one fired, within CatchUp; a slot fired twice (a holder
// that lost its lease without knowing, a catch-up) is the same workflow.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Entry is one schedule, ready to run.
type Entry struct {
	Name string
	Cron string // as written, for listings
	When cron.Schedule
	Spec *spec.Spec // input applied
}

// Clock is the scheduler's time: Now, and a channel that fires after d.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fire is one slot submitted, as Options.Fired hears it.
type Fire struct {
	Schedule string
	Slot     time.Time
	Workflow string
	Existing bool // the slot's workflow existed (another replica fired it)
	Holder   string
}

// Options configures a Scheduler. Entries, Client and Redis are required.
type Options struct {
	Entries []Entry
	// Client submits the runs (without the check against live workers:
	// a run waits for its worker rather than being skipped).
	Client *producer.Client
	// Redis holds the leases and each schedule's last slot.
	Redis redis.UniversalClient
	// Holder names this replica in the leases; "": host, pid and a random
	// part.
	Holder string
	// LeaseTTL is how long a lease lasts unless renewed (every third of
	// it): how long a dead holder's schedules wait for another replica.
	// 0: 10s; at least 300ms.
	LeaseTTL time.Duration
	// CatchUp is how far back a replica that takes a lease over fires the
	// slots its holder missed; older ones are skipped. 0: 1m.
	CatchUp time.Duration
	// Clock is the time; nil: the system's.
	Clock Clock
	// Logger; nil: none.
	Logger *slog.Logger
	// Fired hears each slot submitted; may be nil.
	Fired func(Fire)
}

// Scheduler runs schedules. Use New, then Run.
type Scheduler struct {
	o      Options
	leases *store.Schedules
}

// New checks o and returns a scheduler.
func New(o Options) (*Scheduler, error) {
	switch {
	case o.Client == nil || o.Redis == nil:
		return nil, errors.New("schedule: Options.Client and Options.Redis are required")
	case o.LeaseTTL != 0 && o.LeaseTTL < 300*time.Millisecond:
		return nil, fmt.Errorf("schedule: LeaseTTL %s is under 300ms", o.LeaseTTL)
	case o.CatchUp < 0:
		return nil, fmt.Errorf("schedule: CatchUp %s is negative", o.CatchUp)
	}
	seen := map[string]bool{}
	for _, e := range o.Entries {
		if e.Name == "" || e.When == nil || e.Spec == nil || seen[e.Name] {
			return nil, fmt.Errorf("schedule: entry %q: want a unique name, a cron schedule and a spec", e.Name)
		}
		seen[e.Name] = true
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.CatchUp == 0 {
		o.CatchUp = time.Minute
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = fmt.Sprintf("%s-%d-%06x", host, os.Getpid(), rand.IntN(1<<24))
	}
	return &Scheduler{o: o, leases: store.NewSchedules(o.Redis)}, nil
}

// Run competes for every schedule's lease and runs those it holds, until
// ctx ends; then it gives its leases up so another replica takes over at
// once.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, e := range s.o.Entries {
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, e) }()
	}
	wg.Wait()
	return nil
}

// run is one schedule's loop: take or renew the lease; while held, fire
// the slots that are due; sleep until the next renewal or slot.
func (s *Scheduler) run(ctx context.Context, e Entry) {
	log := s.o.Logger.With("schedule", e.Name, "holder", s.o.Holder)
	var (
		held bool
		last time.Time // the last slot fired (or the point slots are counted from)
	)
	for {
		wait := s.o.LeaseTTL / 3
		ok, err := s.leases.Lease(ctx, e.Name, s.o.Holder, s.o.LeaseTTL)
		if err != nil && ctx.Err() == nil {
			log.Warn("schedule lease: cannot reach Redis; not firing until it answers", "err", err)
		}
		switch {
		case ok && !held:
			last, err = s.startFrom(ctx, e.Name)
			if err != nil {
				log.Warn("schedule: cannot read the last slot fired", "err", err)
				ok = false
				break
			}
			log.Info("schedule lease taken", "from", last)
		case !ok && held:
			log.Info("schedule lease lost (another replica holds it, or Redis did not answer)")
		}
		held = ok
		if held {
			// listed from the moment it is held, not from its first slot
			f := store.Fired{Cron: e.Cron, Spec: e.Spec.Name, Next: Next(e.When, last)}
			if err := s.leases.Announce(ctx, e.Name, s.o.Holder, f, s.o.Clock.Now()); err != nil && ctx.Err() == nil {
				log.Warn("schedule: cannot list the schedule", "err", err)
			}
			var next time.Time
			last, next, held = s.fireDue(ctx, e, last, log)
			if d := next.Sub(s.o.Clock.Now()); held && d < wait {
				wait = max(d, 0)
			}
		}
		select {
		case <-ctx.Done():
			if held {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				_ = s.leases.Release(rctx, e.Name, s.o.Holder)
				cancel()
			}
			return
		case <-s.o.Clock.After(wait):
		}
	}
}

// startFrom is where a new holder counts slots from: the last slot fired,
// if within CatchUp; else CatchUp ago if a slot was ever fired; else now
// (a new schedule fires no past slot).
func (s *Scheduler) startFrom(ctx context.Context, name string) (time.Time, error) {
	now := s.o.Clock.Now()
	lf, err := s.leases.LastFired(ctx, name)
	switch {
	case err != nil:
		return time.Time{}, err
	case lf == nil:
		return now, nil
	case lf.After(now.Add(-s.o.CatchUp)):
		return *lf, nil
	}
	return now.Add(-s.o.CatchUp), nil
}

// fireDue submits every slot after last that is due, renewing the lease
// between slots when a catch-up runs long. It returns the last slot
// fired, the next one, and whether the lease is still held.
func (s *Scheduler) fireDue(ctx context.Context, e Entry, last time.Time, log *slog.Logger) (time.Time, time.Time, bool) {
	renewed := s.o.Clock.Now()
	for {
		slot := Next(e.When, last)
		if slot.After(s.o.Clock.Now()) || ctx.Err() != nil {
			return last, slot, true
		}
		if s.o.Clock.Now().Sub(renewed) > s.o.LeaseTTL/3 {
			if ok, _ := s.leases.Lease(ctx, e.Name, s.o.Holder, s.o.LeaseTTL); !ok {
				return last, slot, false
			}
			renewed = s.o.Clock.Now()
		}
		sub, err := s.o.Client.SubmitWorkflow(ctx, e.Spec, producer.WithIdempotencyKey(Key(e.Name, slot)), producer.WithoutWorkerCheck())
		switch {
		case errors.Is(err, producer.ErrIdempotencyConflict):
			// the slot ran with another version of the spec (replicas
			// with different files): it ran; go on
			log.Error("schedule: the slot's workflow was submitted with another spec or input; not submitting this one", "slot", slot, "err", err)
		case err != nil:
			log.Warn("schedule: submit failed; trying again", "slot", slot, "err", err)
			return last, s.o.Clock.Now().Add(time.Second), true // try the slot again in a second
		}
		next := Next(e.When, slot)
		mine, err := s.leases.MarkFired(ctx, e.Name, s.o.Holder, store.Fired{Slot: slot, Workflow: sub.ID, Cron: e.Cron, Spec: e.Spec.Name, Next: next})
		if err != nil {
			log.Warn("schedule: cannot record the slot fired", "slot", slot, "err", err)
		}
		if sub.ID != "" {
			log.Debug("schedule fired", "slot", slot, "workflow", sub.ID, "existing", sub.Existing)
			if s.o.Fired != nil {
				s.o.Fired(Fire{Schedule: e.Name, Slot: slot, Workflow: sub.ID, Existing: sub.Existing, Holder: s.o.Holder})
			}
		}
		last = slot
		if err == nil && !mine {
			return last, next, false // the lease went to another replica meanwhile
		}
	}
}
