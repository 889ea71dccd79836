package apiclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/flow"
)

// reconnectPauses is the pause before each reconnect of a dropped event
// stream, in order, as Events waits them.
func reconnectPauses() []time.Duration {
	var ps []time.Duration
	for f := 1; f <= eventRetries; f++ {
		ps = append(ps, time.Duration(f)*200*time.Millisecond)
	}
	return ps
}

// A dashboard that goes away mid-stream: Events reconnects from the last
// event it read eventRetries times, pausing as reconnectPauses says, then
// ends with ErrUnavailable (it does not reconnect for as long as the
// dashboard is away).
func TestEventsGiveUpAfterTheirReconnects(t *testing.T) {
	var (
		mu      sync.Mutex
		calls   int
		lastIDs []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Connection", "close") // no kept connection the transport would retry on
			fmt.Fprint(w, "event: step.ready\nid: 1-0\ndata: {\"id\":\"1-0\",\"type\":\"step.ready\",\"step\":\"a\"}\n\n")
			return // the stream closes before the workflow ended
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the dashboard is away: no answer
		}
	}))
	defer srv.Close()

	start := time.Now()
	var got []string
	var last error
	for ev, err := range New(srv.URL, "").Events(t.Context(), "wf_x", "") {
		if err != nil {
			last = err
			break
		}
		got = append(got, ev.ID)
	}
	took := time.Since(start)
	if len(got) != 1 || got[0] != "1-0" {
		t.Fatalf("events %v, want the one the stream sent", got)
	}
	if !errors.Is(last, flow.ErrUnavailable) {
		t.Fatalf("the end: %v, want ErrUnavailable", last)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1+eventRetries {
		t.Fatalf("%d connections, want the first and %d reconnects", calls, eventRetries)
	}
	for i, id := range lastIDs[1:] {
		if id != "1-0" {
			t.Fatalf("reconnect %d resumed after %q, want the last event read (1-0)", i+1, id)
		}
	}
	var sum time.Duration
	for _, p := range reconnectPauses() {
		sum += p
	}
	if took < sum || took > sum+5*time.Second {
		t.Fatalf("gave up after %v, want about %v (its pauses)", took, sum)
	}
}

// docs/handlers.md says how a server client's Events reconnects: as many
// times as it does, with its pauses, and that it then gives up.
func TestHandlersDocSaysHowEventsReconnect(t *testing.T) {
	data, err := os.ReadFile("../../docs/handlers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(data)), " ")
	ps := reconnectPauses()
	var sum time.Duration
	for _, p := range ps {
		sum += p
	}
	secs := func(d time.Duration) string { return strings.TrimSuffix(fmt.Sprintf("%g s", d.Seconds()), ".0") }
	for _, want := range []string{
		fmt.Sprintf("up to %d times in a row", eventRetries),
		fmt.Sprintf("pauses of %s, %s, … %s", secs(ps[0]), secs(ps[1]), secs(ps[len(ps)-1])),
		fmt.Sprintf("about %s in all", secs(sum)),
		"ends with an error that is `ErrUnavailable`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/handlers.md does not say %q", want)
		}
	}
}
