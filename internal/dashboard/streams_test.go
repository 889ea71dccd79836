package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// waitingSpec is a workflow no worker runs in these tests: it waits.
const waitingSpec = "name: waits\nsteps:\n  - { id: s, route: solo, prompt: \"hello\" }\n"

// stream is one event stream read by a test: every event id and type it
// read, in order.
type stream struct {
	resp *http.Response
	mu   sync.Mutex
	ids  []string
	typ  []string
	done chan struct{} // closed when the stream ended
	end  bool          // it ended with "event: end"
}

// openStream opens GET path from the local address from ("": any)
// and reads it until it ends; status is the answer's status.
func openStream(t *testing.T, d *dash, path, from string) (*stream, *http.Response) {
	t.Helper()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.URL+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &stream{resp: resp, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-s.done })
	if resp.StatusCode != http.StatusOK {
		close(s.done)
		return s, resp
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		id := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case line == "event: end":
				s.mu.Lock()
				s.end = true
				s.mu.Unlock()
			case strings.HasPrefix(line, "event: "):
				s.mu.Lock()
				s.ids, s.typ = append(s.ids, id), append(s.typ, strings.TrimPrefix(line, "event: "))
				s.mu.Unlock()
				id = ""
			}
		}
	}()
	return s, resp
}

// read is what s read so far.
func (s *stream) read() (ids, types []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...), append([]string(nil), s.typ...)
}

// close ends the stream from the client's side.
func (s *stream) close() { s.resp.Body.Close(); <-s.done }

// commandCalls is INFO commandstats' calls by command, without INFO's own.
func commandCalls(t *testing.T, rdb redis.UniversalClient) map[string]int {
	t.Helper()
	info, err := rdb.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.Atoi(calls)
	}
	return out
}

// since is the calls of each command between two readings, and their sum.
func since(before, after map[string]int) (map[string]int, int) {
	out, sum := map[string]int{}, 0
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k], sum = d, sum+d
		}
	}
	return out, sum
}

// logger is a store that logs events, to append to a workflow's log as
// its worker would.
func logger(e *testenv.Env) *store.Store {
	s := store.New(e.Redis, time.Hour, nil)
	s.SetLog(store.LogOptions{Limit: 100000})
	return s
}

// Twenty idle followers of one waiting workflow cost its Redis (a server
// of the test's own, so that nothing else counts) at most 5 commands a
// second in all, the dashboard's background work included: they share
// one reader, woken by the log's notices. A new event then reaches every
// follower within a second, read from Redis once for all of them.
func TestIdleFollowersShareOneReader(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	srv.Start()
	e := testenv.Start(t, testenv.Options{RedisAddr: srv.Addr(), NoWorker: true})
	id := e.Submit(t, e.Spec(waitingSpec))
	d := serveDash(t, e, dashboard.Options{})
	const followers = 20
	streams := make([]*stream, followers)
	for i := range streams {
		s, resp := openStream(t, d, "/api/v1/workflows/"+id+"/events", "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("follower %d: %d", i, resp.StatusCode)
		}
		streams[i] = s
	}
	history := func() string {
		_, types := streams[0].read()
		return strings.Join(types, " ")
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		for i, s := range streams {
			if _, types := s.read(); len(types) < 2 {
				return false, fmt.Sprintf("follower %d read %v", i, types)
			}
		}
		return true, ""
	})
	if h := history(); h != "workflow.submitted step.ready" {
		t.Fatalf("history %q", h)
	}
	// the followers' catching up is over once a second passes with
	// (almost) nothing; then the window
	poll.Until(t, 15*time.Second, func() (bool, string) {
		before := commandCalls(t, e.Redis)
		<-time.After(time.Second)
		by, n := since(before, commandCalls(t, e.Redis))
		return n <= 5, fmt.Sprintf("%d commands in a second: %v", n, by)
	})
	const window = 5 * time.Second
	before := commandCalls(t, e.Redis)
	<-time.After(window)
	by, n := since(before, commandCalls(t, e.Redis))
	t.Logf("%d idle followers: %d commands in %s: %v", followers, n, window, by)
	if n > 5*int(window/time.Second) {
		t.Fatalf("%d idle followers of one workflow cost %d commands in %s (%v): want at most 5 a second", followers, n, window, by)
	}

	// a new event reaches every follower within a second, read once
	before = commandCalls(t, e.Redis)
	start := time.Now()
	if err := logger(e).Log(t.Context(), id, store.Event{Type: record.EventLLMCall, Step: "s", Provider: "oa"}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		for i, s := range streams {
			if _, types := s.read(); len(types) < 3 {
				return false, fmt.Sprintf("follower %d read %v", i, types)
			}
		}
		return true, ""
	})
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the new event reached every follower in %s, want within 1s", took)
	}
	for i, s := range streams {
		if _, types := s.read(); strings.Join(types, " ") != "workflow.submitted step.ready llm.call" {
			t.Fatalf("follower %d read %v", i, types)
		}
	}
	by, _ = since(before, commandCalls(t, e.Redis))
	if by["xrange"] > 2 {
		t.Fatalf("one new event was read %d times for %d followers (%v): want once", by["xrange"], followers, by)
	}
}

// Past dashboard.max_streams_per_client one address gets 429, past
// dashboard.max_streams anyone 503, both with Retry-After; a closed
// stream frees its slot, and the open streams are a gauge.
func TestEventStreamsAreCapped(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	e.Config.Dashboard.MaxStreams, e.Config.Dashboard.MaxStreamsPerClient = 3, 2
	id := e.Submit(t, e.Spec(waitingSpec))
	d := serveDash(t, e, dashboard.Options{})
	path := "/api/v1/workflows/" + id + "/events"
	a1, _ := openStream(t, d, path, "127.0.0.1")
	openStream(t, d, path, "127.0.0.1")
	_, resp := openStream(t, d, path, "127.0.0.1")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third stream from one address: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, resp := openStream(t, d, path, "127.0.0.2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another address's stream: %d", resp.StatusCode)
	}
	_, resp = openStream(t, d, path, "127.0.0.3")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth stream: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "dashboard.max_streams") {
		t.Fatalf("the 503 says %q", b)
	}
	if m := d.do(t, call{Path: "/metrics"}).Body; !strings.Contains(m, "agentq_dashboard_event_streams 3") {
		t.Fatalf("metrics without agentq_dashboard_event_streams 3:\n%s", grepLines(m, "agentq_dashboard"))
	}
	a1.close()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		s, resp := openStream(t, d, path, "127.0.0.3")
		if resp.StatusCode == http.StatusOK {
			s.close()
			return true, ""
		}
		return false, fmt.Sprintf("after a stream closed: %d", resp.StatusCode)
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A client that stops reading is dropped when a write takes longer than
// the write timeout, and its slot is freed.
func TestAStalledStreamIsDroppedAndFreesItsSlot(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	e.Config.Dashboard.MaxStreams, e.Config.Dashboard.MaxStreamsPerClient = 10, 1
	id := e.Submit(t, e.Spec(waitingSpec))
	// a history of some megabytes: more than the sockets' buffers hold
	text := strings.Repeat("x", store.MaxEventTextBytes-100)
	evs := make([]store.Event, 1000)
	for i := range evs {
		evs[i] = store.Event{Type: record.EventDelta, Step: "s", Text: text}
	}
	for range 3 {
		if err := logger(e).Log(t.Context(), id, evs...); err != nil {
			t.Fatal(err)
		}
	}
	d := serveDash(t, e, dashboard.Options{StreamWriteTimeout: 500 * time.Millisecond})
	// a client with a small receive buffer that never reads
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := dialer.DialContext(t.Context(), "tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /api/v1/workflows/%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", id, strings.TrimPrefix(d.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	streamsOpen := func() string {
		for _, l := range strings.Split(d.do(t, call{Path: "/metrics"}).Body, "\n") {
			if strings.HasPrefix(l, "agentq_dashboard_event_streams ") {
				return l
			}
		}
		return "no agentq_dashboard_event_streams"
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		m := streamsOpen()
		return m == "agentq_dashboard_event_streams 1", "the stalled stream is not open yet: " + m
	})
	if _, resp := openStream(t, d, "/api/v1/workflows/"+id+"/events?after=1-0", ""); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("while the stalled stream holds the address's slot: %d, want 429", resp.StatusCode)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		m := streamsOpen()
		return m == "agentq_dashboard_event_streams 0", "the stalled stream is still open: " + m
	})
	s, resp := openStream(t, d, "/api/v1/workflows/"+id+"/events?after="+lastID(t, e, id), "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("once the stalled stream was dropped: %d", resp.StatusCode)
	}
	s.close()
}

// lastID is the id of the last event of a workflow's log.
func lastID(t *testing.T, e *testenv.Env, id string) string {
	t.Helper()
	last, err := logger(e).LastEventID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// A workflow id or an event id that is malformed or too long is 400,
// even one that parses; no answer echoes a long id.
func TestEventStreamIDsAreChecked(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec(waitingSpec))
	d := serveDash(t, e, dashboard.Options{})
	huge := "wf_" + strings.Repeat("a", 900<<10)
	for _, c := range []struct {
		path   string
		header map[string]string
		want   int
	}{
		{path: "/api/v1/workflows/" + id + "/events?after=" + strings.Repeat("0", 40) + "1-0", want: 400}, // parses as 1-0
		{path: "/api/v1/workflows/" + id + "/events?after=01-0", want: 400},
		{path: "/api/v1/workflows/" + id + "/events?after=1-0.1000000000000", want: 400},
		{path: "/api/v1/workflows/" + id + "/events", header: map[string]string{"Last-Event-ID": strings.Repeat("9", 5000)}, want: 400},
		{path: "/api/v1/workflows/" + id + "/events?after=nonsense", want: 400},
		{path: "/api/v1/workflows/" + huge + "/events", want: 400},
		{path: "/api/v1/workflows/" + strings.Repeat("a", 129) + "/events", want: 400},
		{path: "/api/v1/workflows/wf%7Bx%7D/events", want: 400},
		{path: "/api/v1/workflows/wf_nosuchworkflow/events", want: 404},
	} {
		r := d.do(t, call{Path: c.path, Header: c.header})
		if r.Code != c.want {
			t.Errorf("%.80s: %d %.200s, want %d", c.path, r.Code, r.Body, c.want)
		}
		if len(r.Body) > 600 {
			t.Errorf("%.80s: a %d-byte answer: %.300s…", c.path, len(r.Body), r.Body)
		}
	}
	// a well-formed id still works
	s, resp := openStream(t, d, "/api/v1/workflows/"+id+"/events?after=1-0", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after=1-0: %d", resp.StatusCode)
	}
	s.close()
}

// Followers miss nothing while the dashboard's Pub/Sub connection is
// away: an event logged then reaches them once it is back (each
// subscription's confirmation has its workflow read again). A cancel then
// ends every stream with its workflow.
func TestFollowersRideAPubSubReconnectAndEndWithTheirWorkflow(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	srv.Start()
	e := testenv.Start(t, testenv.Options{RedisAddr: srv.Addr(), NoWorker: true})
	id := e.Submit(t, e.Spec(waitingSpec))
	d := serveDash(t, e, dashboard.Options{})
	streams := make([]*stream, 3)
	for i := range streams {
		streams[i], _ = openStream(t, d, "/api/v1/workflows/"+id+"/events", "")
	}
	readAll := func(n int) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() (bool, string) {
			for i, s := range streams {
				if _, types := s.read(); len(types) < n {
					return false, fmt.Sprintf("follower %d read %v, want %d events", i, types, n)
				}
			}
			return true, ""
		})
	}
	readAll(2)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		n, err := e.Redis.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Int()
		return err == nil && n > 0, fmt.Sprintf("no Pub/Sub connection to kill yet (%d, %v)", n, err)
	})
	if err := logger(e).Log(t.Context(), id, store.Event{Type: record.EventLLMCall, Step: "s", Provider: "oa"}); err != nil {
		t.Fatal(err)
	}
	readAll(3)
	if r := d.do(t, call{Method: "POST", Path: "/api/v1/workflows/" + id + "/cancel"}); r.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Code, r.Body)
	}
	for i, s := range streams {
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("follower %d: its stream did not end with its workflow", i)
		}
		ids, types := s.read()
		s.mu.Lock()
		end := s.end
		s.mu.Unlock()
		if !end || types[len(types)-1] != record.EventEnded || len(types) != len(ids) {
			t.Fatalf("follower %d read %v (end %v)", i, types, end)
		}
		for j := 1; j < len(ids); j++ {
			if !record.EventIDBefore(ids[j-1], ids[j]) {
				t.Fatalf("follower %d: %s after %s", i, ids[j], ids[j-1])
			}
		}
	}
}
