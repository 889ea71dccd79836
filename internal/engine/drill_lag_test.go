package engine_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// The failover drill with a replica that really lags: it replicates
// through a LagLink, which stops handing it the primary's stream mid-run
// (the primary takes writes all the same). The other replica is frozen
// right before the primary is SIGKILLed, so the sentinels can only
// promote the lagging one; its link is cut at the kill, so it never gets
// the tail. Then the frozen replica is let go and the dead primary's
// process started again, both pointed at the new primary at once (as the
// sentinels do, the latter some seconds later).
//   - without durability: whatever was acknowledged in the lag is lost;
//     the workflows lost (submit told done, record gone), the ones left
//     stranded, the steps done again and the provider answers are
//     counted and logged (the test fails when nothing was lost and no
//     step done again: the lag was not real);
//   - with redis.durability asking both replicas: none lost, every call
//     answered; answers beyond the calls (work done on writes told "not
//     confirmed", lost with them and done again) are logged.
func TestSentinelFailoverDrillWithALaggingReplica(t *testing.T) {
	t.Parallel() // mostly waiting for Sentinel: alongside the other waiting tests
	n := drillWorkflows(t)
	// one after the other: side by side, the full drill's load can make
	// the sentinels' first election fail, and the next comes two minutes
	// later (StartSentinelsWithLag's failover-timeout)
	t.Run("without durability", func(t *testing.T) { lagDrill(t, n, nil) })
	t.Run("with durability (replicas: 2)", func(t *testing.T) {
		lagDrill(t, n, &config.Durability{Replicas: 2, Timeout: config.Duration(time.Second)})
	})
}

// lagDrill runs the drill with n workflows on a deployment of its own,
// with redis.durability as given (nil: off).
func lagDrill(t *testing.T, n int, durability *config.Durability) {
	sn, link := redistest.StartSentinelsWithLag(t, 2, 0)
	lagging, other := sn.Replicas[0], sn.Replicas[1]
	oldPrimary := sn.Primary.Addr()
	e := testenv.Start(t, testenv.Options{Sentinel: sn, Steps: drillSteps, Durability: durability, RecordAnswered: 100_000,
		Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(100 * time.Millisecond)}}}})
	var stepsDone func() map[string]int
	if durability == nil {
		stepsDone = countStepsDone(t, e)
	}
	d := newDrill(t, e, n)
	ctx := t.Context()

	// the first half in sync; then the link stalls and the rest are
	// submitted, one every 50ms, each on its own (with durability, a
	// submit told "not confirmed" retries with its key and holds up none
	// of the next)
	for i := range n / 2 {
		d.wg.Go(func() { d.submit(ctx, t, i) })
	}
	d.wg.Wait()
	d.mu.Lock()
	retried0 := d.retried
	d.mu.Unlock()
	link.Stall()
	stalledAt := time.Now()
	d.wg.Go(func() {
		for i := n / 2; i < n; i++ {
			d.wg.Go(func() { d.submit(ctx, t, i) })
			time.Sleep(50 * time.Millisecond) //nolint: pacing the submits through the lag, not waiting for anything
		}
	})
	// the lag lasts until every submit of the second half had its first
	// answer: told done (in the lag) or "not confirmed" (retried)
	poll.Until(t, 60*time.Second, func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		answered := d.retried - retried0
		for _, id := range d.ids[n/2:] {
			if id != "" {
				answered++
			}
		}
		return answered >= n-n/2, "every submit of the second half answered once"
	})
	if got := masterPort(t, lagging.Addr()); got != fmt.Sprint(link.Port) {
		t.Fatalf("the lagging replica replicates from port %s, not through the link (%d): the lag is not real", got, link.Port)
	}
	d.mu.Lock()
	inLag := 0
	for _, id := range d.ids[n/2:] {
		if id != "" {
			inLag++
		}
	}
	d.mu.Unlock()
	t.Logf("lagged %s: %d bytes of the stream held back from the replica, %d submits told done in the lag",
		time.Since(stalledAt).Round(time.Millisecond), link.Held(), inLag)

	// the other replica stops, the primary dies with the link lagging
	other.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			other.Thaw()
		}
	}()
	link.Cut()
	killedAt := time.Now()
	sn.Primary.Kill()
	// a minute's failover-timeout (StartSentinelsWithLag): should the
	// sentinels' first election fail, the next comes two of them later
	promoted := sn.WaitPromotion(t, oldPrimary, 150*time.Second)
	promotedAt := time.Now()
	if promoted != lagging.Addr() {
		t.Fatalf("the sentinels promoted %s, not the lagging replica %s", promoted, lagging.Addr())
	}
	everySentinelNames(t, sn, promoted)
	other.Thaw()
	thawed = true
	replicaOf(t, other.Addr(), promoted)
	sn.Primary.Start()
	replicaOf(t, oldPrimary, promoted)
	t.Logf("primary %s killed; the lagging replica %s promoted after %s", oldPrimary, promoted, promotedAt.Sub(killedAt).Round(time.Millisecond))

	if durability == nil {
		l := d.tally(t)
		done := stepsDone()
		paidLost, twice := 0, 0
		for key, times := range done {
			wf, step, _ := strings.Cut(key, "/")
			if l.lost[wf] {
				paidLost += callsOf(step) * times
			} else if times > 1 {
				twice += times - 1
			}
		}
		t.Logf("without durability: %d workflows, %d submits retried with their key; %d lost (submit told done, record gone), %d stranded, %d completed; provider calls due: %d for all submitted, %d for those completed; %d answers: %d beyond the completed workflows' calls (paid for lost or stranded workflows, or twice), of which about %d for steps of lost workflows done before the kill; %d steps done again after the failover",
			n, d.retried, len(l.lost), l.stranded, l.completed, l.due, l.steps, l.answers, l.answers-l.steps, paidLost, twice)
		if len(l.lost) == 0 && twice == 0 {
			t.Errorf("nothing lost and no step done again: the replica did not really lag")
		}
		return
	}
	resumed := firstStepDone(t, e, promotedAt)
	if now := sn.WaitReplicasOfMaster(t, 2, 60*time.Second); now != promoted {
		t.Logf("the sentinels failed over again, to %s (a loaded machine)", now)
	}
	t.Logf("two replicas in sync again %s after the promotion", time.Since(promotedAt).Round(time.Millisecond))
	// every workflow whose submit succeeded completes (e.Wait fails the
	// test on one lost); every call is answered. Answers beyond the calls
	// are not a confirmed answer paid twice: work done on writes told "not
	// confirmed" (a submit's steps already running, a durable call kept
	// unconfirmed) is lost with them and done again; they are logged.
	d.wg.Wait()
	steps := 0
	for i, id := range d.ids {
		if id != "" {
			e.Wait(t, id, 120*time.Second, store.StateCompleted)
			steps += d.calls(i)
		}
	}
	answers := e.Chaos.Snapshot().Count("openai", "", "ok")
	if answers < steps {
		t.Errorf("%d provider answers for %d calls: a step was never asked; never answered: %q", answers, steps, d.unanswered(t))
	}
	t.Logf("with durability: %d workflows (%d provider calls), %d submits retried with their key; 0 lost; steps resumed %s after the promotion, all done %s after it; %d answers (%d beyond the calls)",
		n, steps, d.retried, resumed.Round(time.Millisecond), time.Since(promotedAt).Round(time.Millisecond), answers, answers-steps)
}

// lagTally is how a drill without durability ended: the workflows lost
// (submit told done, record gone, by id), stranded (neither lost nor
// finished) and completed; the provider calls due for those completed and
// for all submitted; the provider's answers.
type lagTally struct {
	lost                            map[string]bool
	stranded, completed, steps, due int
	answers                         int
}

// tally waits for the submits and then for every workflow submitted to
// be done with, without failing the test on a loss; a workflow is
// stranded when it is neither lost nor finished once no workflow has
// moved for 10s.
func (d *drill) tally(t *testing.T) lagTally {
	t.Helper()
	d.wg.Wait()
	l := lagTally{lost: map[string]bool{}}
	open := map[int]string{}
	for i, id := range d.ids {
		if id != "" {
			open[i] = id
			l.due += d.calls(i)
		}
	}
	moved := time.Now()
	for len(open) > 0 && time.Since(moved) < 10*time.Second {
		for i, id := range open {
			wf, err := d.e.Store.Get(t.Context(), id)
			switch {
			case errors.Is(err, store.ErrNotFound):
				l.lost[id] = true
			case err != nil:
				continue // Redis away: look again
			case wf.State == store.StateCompleted:
				l.completed++
				l.steps += d.calls(i)
			case wf.State == store.StateFailed || wf.State == store.StateCanceled:
				t.Logf("workflow %s %s", id, wf.State)
			default:
				continue
			}
			delete(open, i)
			moved = time.Now()
		}
		time.Sleep(100 * time.Millisecond) //nolint: polling with a deadline
	}
	for _, id := range open {
		if wf, err := d.e.Store.Get(t.Context(), id); err == nil {
			t.Logf("stranded: workflow %s %s", id, wf.State)
		}
	}
	l.stranded = len(open)
	l.answers = d.e.Chaos.Snapshot().Count("openai", "", "ok")
	return l
}

// callsOf is how many provider calls the drill's step makes: two for the
// code step's durable calls, none for a child or a signal wait, one for
// any other.
func callsOf(step string) int {
	switch step {
	case "ask":
		return 2
	case "kid", "paid":
		return 0
	}
	return 1
}

// countStepsDone counts, from the worker's step events (taken from now
// on), how many times each step was done ("workflow/step"): more than
// once when a failover lost its settle and it ran again. The func
// returned gives a copy of the counts.
func countStepsDone(t *testing.T, e *testenv.Env) func() map[string]int {
	var (
		mu   sync.Mutex
		done = map[string]int{}
	)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case ev := <-e.Events:
				if ev.Step != "" && ev.State == store.StepDone {
					mu.Lock()
					done[ev.Workflow+"/"+ev.Step]++
					mu.Unlock()
				}
			case <-stop:
				return
			}
		}
	}()
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(done)
	}
}

// masterPort is the port the replica at addr replicates from (its INFO).
func masterPort(t *testing.T, addr string) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(t.Context(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "master_port:"); ok {
			return v
		}
	}
	return ""
}

// everySentinelNames waits until every sentinel names primary, as a
// returning node must before it follows it: a sentinel still naming the
// old primary, finding it a replica, would fail it over again.
func everySentinelNames(t *testing.T, sn *redistest.Sentinels, primary string) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		for _, a := range sn.Addrs {
			c := redis.NewSentinelClient(&redis.Options{Addr: a})
			m, err := c.GetMasterAddrByName(t.Context(), sn.MasterName).Result()
			c.Close()
			if err != nil || len(m) != 2 || net.JoinHostPort(m[0], m[1]) != primary {
				return false, "every sentinel naming " + primary
			}
		}
		return true, ""
	})
}

// replicaOf points the server at addr at primary, as the sentinels do to
// a replica they find following the old one.
func replicaOf(t *testing.T, addr, primary string) {
	t.Helper()
	h, p, err := net.SplitHostPort(primary)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Do(t.Context(), "REPLICAOF", h, p).Err(); err != nil {
		t.Fatal(fmt.Errorf("REPLICAOF %s on %s: %w", primary, addr, err))
	}
}
