package dashboard

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/defaults"
)

// streamRetryAfter is what a refused stream is told to wait: streams
// last as long as their workflows, so a slot frees up at its own pace.
const streamRetryAfter = 10 * time.Second

// streamCaps bounds the event streams served at once: all of them
// (dashboard.max_streams) and those of one client address
// (dashboard.max_streams_per_client, by clientAddr: behind a reverse
// proxy every client is the proxy's).
type streamCaps struct {
	max, perClient int

	mu   sync.Mutex
	open int
	by   map[string]int
}

func newStreamCaps(c config.Dashboard) *streamCaps {
	s := &streamCaps{max: c.MaxStreams, perClient: c.MaxStreamsPerClient, by: map[string]int{}}
	if s.max <= 0 {
		s.max = defaults.MaxStreams
	}
	if s.perClient <= 0 {
		s.perClient = min(defaults.MaxStreamsPerClient, s.max)
	}
	return s
}

// acquire takes a slot for a stream of client addr, or answers the
// request: 503 past max_streams, 429 past max_streams_per_client, both
// with Retry-After. release gives the slot back (once).
func (s *streamCaps) acquire(w http.ResponseWriter, addr string) (release func(), ok bool) {
	s.mu.Lock()
	status, msg := 0, ""
	switch {
	case s.open >= s.max:
		status, msg = http.StatusServiceUnavailable, "this dashboard serves "+strconv.Itoa(s.max)+" event streams already (dashboard.max_streams): try again later"
	case s.by[addr] >= s.perClient:
		status, msg = http.StatusTooManyRequests, "your address has "+strconv.Itoa(s.perClient)+" event streams open already (dashboard.max_streams_per_client): close one or try again later"
	default:
		s.open++
		s.by[addr]++
	}
	s.mu.Unlock()
	if status != 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(streamRetryAfter.Seconds())))
		writeJSON(w, status, map[string]string{"error": msg, "code": "too_many_streams"})
		return nil, false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.open--
			if s.by[addr]--; s.by[addr] <= 0 {
				delete(s.by, addr)
			}
		})
	}, true
}

// Open is how many streams are served now.
func (s *streamCaps) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}
