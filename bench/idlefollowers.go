package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// -followers N -idle W: one dashboard process serves N event-stream
// followers spread over W workflows that wait (no worker runs them), from
// followerAddrs loopback addresses. Once every follower has read its
// history, Redis's commands are counted over idleFollowWindow (the dashboard is
// its only client then); then one event is logged to every workflow, and
// each follower's latency is from that write to its reading the event.
// Reported besides: the dashboard's RSS then and at its peak.

// Targets of -followers with -idle.
const (
	idleCommandsPerSec = 50
	idleRSSMiB         = 150
	idleLagMax         = time.Second
	idleFollowWindow   = 30 * time.Second
)

// IdleFollowersReport is what a -followers -idle run measured.
type IdleFollowersReport struct {
	Followers, Workflows int
	// CommandsPerSec is Redis's commands a second while every follower
	// idles (commands run inside scripts counted), Top the busiest.
	CommandsPerSec float64
	Top            []string `json:",omitempty"`
	// DashboardRSSMiB is the dashboard's RSS while they idle, PeakRSSMiB
	// its peak (the followers connecting and reading their history).
	DashboardRSSMiB, DashboardPeakRSSMiB float64
	// DashboardGo is what the dashboard's Go runtime said of its memory
	// then (its /metrics: go_memstats_*_bytes, MiB).
	DashboardGo map[string]float64 `json:",omitempty"`
	// Lag is from a new event's write to its follower's read of it.
	LagP50ms, LagP99ms, LagMaxMs float64
	// Complete says every follower read its history and the new event,
	// in order, once each.
	Complete bool
}

func runIdleFollowers(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaosURL string) error {
	if p.followers < p.idleWorkflows {
		return errors.New("-idle needs at least as many -followers as workflows")
	}
	cmd, base, stop, err := startDashboard(ctx, db, chaosURL)
	if err != nil {
		return err
	}
	defer stop()
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return err
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"},
		EventLimit: 10000, SkipWorkerCheck: true})
	ids, err := submitAll(ctx, client, chainShape(p.idleWorkflows, 1))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bench: %d followers of %d waiting workflows on %s\n", p.followers, len(ids), base)
	hc := followerClient(p.followers)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		bad     []string
		got     = make([]time.Time, p.followers) // when follower i read the new event
		history = make(chan error, p.followers)
		newEv   = make(chan struct{})
	)
	for i := range p.followers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at, err := idleFollow(fctx, hc, base, ids[i%len(ids)], history, newEv)
			mu.Lock()
			defer mu.Unlock()
			got[i] = at
			if err != nil && fctx.Err() == nil {
				bad = append(bad, fmt.Sprintf("follower %d: %v", i, err))
			}
		}()
	}
	for range p.followers {
		if err := <-history; err != nil {
			cancel()
			wg.Wait()
			return err
		}
	}
	fmt.Fprintf(out, "bench: every follower read its history; counting Redis's commands for %s\n", idleFollowWindow)
	select { // the topics' first reads settle
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleFollowWindow):
	}
	cost := commandCost(ctx, rdb, int(idleFollowWindow/time.Second))
	r := IdleFollowersReport{Followers: p.followers, Workflows: len(ids), CommandsPerSec: cost.CallsPerStep, Top: cost.Top}
	r.DashboardRSSMiB, r.DashboardPeakRSSMiB = procRSS(cmd.Process.Pid)
	r.DashboardGo = goMemory(ctx, base)

	// one new event for every workflow
	s := store.New(rdb, time.Hour, nil)
	s.SetLog(store.LogOptions{Limit: 10000})
	close(newEv)
	written := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		written[id] = time.Now()
		if err := s.Log(ctx, id, store.Event{Type: record.EventLLMCall, Step: "s0", Provider: "bench"}); err != nil {
			return err
		}
	}
	deadline := time.AfterFunc(30*time.Second, cancel)
	wg.Wait()
	deadline.Stop()
	var lags []float64
	for i, at := range got {
		if at.IsZero() {
			continue
		}
		lags = append(lags, float64(at.Sub(written[ids[i%len(ids)]]).Microseconds())/1000)
	}
	r.Complete = len(bad) == 0 && len(lags) == p.followers
	sort.Float64s(lags)
	r.LagP50ms, r.LagP99ms = percentile(lags, 50), percentile(lags, 99)
	if len(lags) > 0 {
		r.LagMaxMs = lags[len(lags)-1]
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	_ = cmd.Wait()
	fmt.Fprintf(out, "\n| idle followers | workflows | Redis commands/s (target ≤ %d) | dashboard RSS / peak MiB (target ≤ %d) | new event's lag p50 / p99 / max ms (target max < %d) | complete |\n",
		idleCommandsPerSec, idleRSSMiB, idleLagMax.Milliseconds())
	fmt.Fprintf(out, "| ---: | ---: | ---: | ---: | ---: | --- |\n")
	fmt.Fprintf(out, "| %d | %d | %.2f | %.0f / %.0f | %.0f / %.0f / %.0f | %v |\n", r.Followers, r.Workflows, r.CommandsPerSec,
		r.DashboardRSSMiB, r.DashboardPeakRSSMiB, r.LagP50ms, r.LagP99ms, r.LagMaxMs, r.Complete)
	fmt.Fprintf(out, "\nbusiest commands while idle: %s\n", strings.Join(r.Top, ", "))
	fmt.Fprintf(out, "the dashboard's Go memory while idle, MiB: %v\n", r.DashboardGo)
	for i, b := range bad {
		if i == 5 {
			fmt.Fprintf(out, "… and %d more\n", len(bad)-5)
			break
		}
		fmt.Fprintln(out, "incomplete:", b)
	}
	if r.CommandsPerSec > idleCommandsPerSec || r.DashboardRSSMiB > idleRSSMiB || r.LagMaxMs >= float64(idleLagMax.Milliseconds()) || !r.Complete {
		fmt.Fprintln(out, "\ntarget missed")
	}
	return writeReport(p.jsonOut, r)
}

// idleFollow follows one waiting workflow: it says on history when it
// read its history (workflow.submitted, step.ready), then idles until
// newEv closes, and returns when it read the next event.
func idleFollow(ctx context.Context, hc *http.Client, base, id string, history chan<- error, newEv <-chan struct{}) (time.Time, error) {
	told := false
	tell := func(err error) {
		if !told {
			told = true
			history <- err
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/workflows/"+id+"/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		tell(err)
		return time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		err := fmt.Errorf("status %d: %s", resp.StatusCode, b)
		tell(err)
		return time.Time{}, err
	}
	sc := bufio.NewScanner(resp.Body)
	var types []string
	for sc.Scan() {
		typ, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			continue
		}
		now := time.Now()
		types = append(types, typ)
		switch len(types) {
		case 2:
			if strings.Join(types, " ") != record.EventSubmitted+" "+record.EventReady {
				err := fmt.Errorf("history %v", types)
				tell(err)
				return time.Time{}, err
			}
			tell(nil)
		case 3:
			select {
			case <-newEv:
			default:
				return time.Time{}, fmt.Errorf("an event before any was written: %v", types)
			}
			if typ != record.EventLLMCall {
				return time.Time{}, fmt.Errorf("events %v", types)
			}
			return now, nil
		}
	}
	err = fmt.Errorf("the stream closed after %v: %v", types, sc.Err())
	tell(err)
	return time.Time{}, err
}

// peakRSS is a running child process's own peak resident set, MiB
// (/proc's VmHWM), read before it is stopped. Not rusage's ru_maxrss:
// Linux carries into a child the high-water mark of the memory it was
// started from (this bench's, shared until the exec), so a worker's
// figure was never under the bench's own peak.
func peakRSS(pid int) float64 {
	_, peak := procRSS(pid)
	return math.Round(peak)
}

// procRSS is a process's resident set and its peak, MiB (Linux).
func procRSS(pid int) (rss, peak float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			peak = kb / 1024
		}
	}
	return rss, peak
}

// goMemory reads a process's Go memory gauges (MiB) and its goroutines'
// count from its /metrics (the dashboard's, a worker's); nil or empty if
// it cannot.
func goMemory(ctx context.Context, base string) map[string]float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		switch name {
		case "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes",
			"go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines":
		default:
			ok = false
		}
		if ok {
			f, _ := strconv.ParseFloat(v, 64)
			if name != "go_goroutines" {
				f /= 1 << 20
			}
			out[strings.TrimSuffix(strings.TrimPrefix(name, "go_memstats_"), "_bytes")] = f
		}
	}
	return out
}
