package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
)

// -followers N: one dashboard process (cmd/dashboard) serves N concurrent
// event-stream followers (GET /api/v1/workflows/{id}/events), one per
// running workflow, while an in-process worker runs the workflows (chains
// of -length streaming steps at -latency each). Reported: the dashboard's
// peak RSS, and how far behind the followers were: for every event, from
// when it was logged (its at) to when its follower read it.

// Targets of -followers.
const (
	followersRSSMiB = 200
	followerLagMax  = time.Second
)

// FollowersReport is what a -followers run measured; -json writes it.
type FollowersReport struct {
	Followers, Workflows, Steps  int
	Events                       int
	Seconds                      float64
	DashboardPeakRSSMiB          float64
	DashboardCPUSec              float64
	LagP50ms, LagP99ms, LagMaxMs float64
	// Complete says every follower read its workflow's whole log, in order,
	// once each, and its stream ended after the workflow did.
	Complete bool
}

func runFollowers(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaosURL string) error {
	if p.idleWorkflows > 0 {
		return runIdleFollowers(ctx, p, out, rdb, db, chaosURL)
	}
	cmd, base, stop, err := startDashboard(ctx, db, chaosURL)
	if err != nil {
		return err
	}
	defer stop()

	// the workflows, submitted before the worker starts: every follower
	// connects to a workflow that has not begun, and reads it all live
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return err
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"},
		EventLimit: 10000, SkipWorkerCheck: true})
	sh := streaming(chainShape(p.followers, p.length))
	ids, err := submitAll(ctx, client, sh)
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		lags   []float64
		events int
		bad    []string
		wg     sync.WaitGroup
	)
	hc := followerClient(p.followers)
	connected := make(chan struct{}, len(ids))
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, l, err := follow(ctx, hc, base, id, connected)
			mu.Lock()
			defer mu.Unlock()
			events += got
			lags = append(lags, l...)
			if err != nil {
				bad = append(bad, id+": "+err.Error())
			}
		}()
	}
	for range ids {
		<-connected
	}
	fmt.Fprintf(out, "bench: %d followers connected to %s; starting the worker\n", len(ids), base)
	secs, err := runWorkerUntil(ctx, p, sh, rdb, db, chaosURL)
	if err != nil {
		return err
	}
	wg.Wait()
	peak := peakRSS(cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	_ = cmd.Wait()
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r := FollowersReport{Followers: len(ids), Workflows: len(ids), Steps: len(ids) * sh.steps, Events: events, Seconds: secs, Complete: len(bad) == 0}
	if ru != nil {
		r.DashboardPeakRSSMiB = peak
		r.DashboardCPUSec = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	sort.Float64s(lags)
	r.LagP50ms, r.LagP99ms = percentile(lags, 50), percentile(lags, 99)
	if len(lags) > 0 {
		r.LagMaxMs = lags[len(lags)-1]
	}
	fmt.Fprintf(out, "\n| followers | steps | events read | seconds | dashboard peak RSS MiB (target < %d) | dashboard CPU s | lag p50 / p99 / max ms (target max < %d) | complete |\n",
		followersRSSMiB, followerLagMax.Milliseconds())
	fmt.Fprintf(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	fmt.Fprintf(out, "| %d | %d | %d | %.1f | %.0f | %.1f | %.0f / %.0f / %.0f | %v |\n", r.Followers, r.Steps, r.Events, r.Seconds, r.DashboardPeakRSSMiB,
		r.DashboardCPUSec, r.LagP50ms, r.LagP99ms, r.LagMaxMs, r.Complete)
	for i, b := range bad {
		if i == 5 {
			fmt.Fprintf(out, "… and %d more\n", len(bad)-5)
			break
		}
		fmt.Fprintln(out, "incomplete:", b)
	}
	if r.DashboardPeakRSSMiB >= followersRSSMiB || r.LagMaxMs >= float64(followerLagMax.Milliseconds()) || !r.Complete {
		fmt.Fprintln(out, "\ntarget missed")
	}
	return writeReport(p.jsonOut, r)
}

// startDashboard runs a dashboard process (cmd/dashboard) on db and
// returns it, its base URL, and a stop for when it was not stopped.
func startDashboard(ctx context.Context, db redistest.DB, chaosURL string) (*exec.Cmd, string, func(), error) {
	dir, bin, err := buildCmd(ctx, "dashboard")
	if err != nil {
		return nil, "", nil, err
	}
	cfgPath := filepath.Join(dir, "agentq.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("redis: { addr: %q, db: %d }\n%s", db.Addr, db.DB, benchConfig)), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	cmd := exec.Command(bin, "--config", cfgPath, "--addr", addr, "--log-level", "error")
	cmd.Env = append(os.Environ(), "CHAOS="+chaosURL)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	stop := func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		os.RemoveAll(dir)
	}
	base := "http://" + addr
	if err := waitHTTP(ctx, base+"/healthz"); err != nil {
		stop()
		return nil, "", nil, err
	}
	return cmd, base, stop, nil
}

// followerAddrs is how many loopback addresses the followers connect
// from (127.0.0.2 on): a dashboard serves dashboard.max_streams_per_client
// (100) streams to one address.
const followerAddrs = 60

// followerClient is an HTTP client for n followers, each connection from
// the next of followerAddrs loopback addresses.
func followerClient(n int) *http.Client {
	var next atomic.Uint64
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ip := net.IPv4(127, 0, 0, byte(2+next.Add(1)%followerAddrs))
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
			return d.DialContext(ctx, network, addr)
		}}}
}

// follow reads one workflow's event stream to its end, and says how
// many events it read and how late each was.
func follow(ctx context.Context, hc *http.Client, base, id string, connected chan<- struct{}) (int, []float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/workflows/"+id+"/events", nil)
	resp, err := hc.Do(req)
	connected <- struct{}{}
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var (
		lags      []float64
		n         int
		last      string
		ended     bool
		sawSubmit bool
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "event: end" {
			if !ended {
				return n, lags, fmt.Errorf("the stream ended without workflow.ended")
			}
			if !sawSubmit {
				return n, lags, fmt.Errorf("the history did not start at workflow.submitted")
			}
			return n, lags, nil
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		now := time.Now()
		var e record.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return n, lags, err
		}
		if e.ID != "" && last != "" && !record.EventIDBefore(last, e.ID) {
			return n, lags, fmt.Errorf("event %s after %s: out of order or twice", e.ID, last)
		}
		last = e.ID
		n++
		sawSubmit = sawSubmit || e.Type == record.EventSubmitted
		ended = e.Type == record.EventEnded
		lags = append(lags, float64(now.Sub(e.At).Microseconds())/1000)
	}
	return n, lags, fmt.Errorf("the stream closed without its end: %v", sc.Err())
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer in 30s", url)
}

// runWorkerUntil runs an in-process worker until sh's workflows (already
// submitted) have settled, and returns how long that took.
func runWorkerUntil(ctx context.Context, p params, sh shape, rdb *redis.Client, db redistest.DB, chaosURL string) (float64, error) {
	cfg, err := benchCfg(db, chaosURL, p.concurrency)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	w, err := startWorker(ctx, p, sh, cfg, rdb)
	if err != nil {
		return 0, err
	}
	defer w.stop()
	if err := w.wait(); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), w.stop()
}
