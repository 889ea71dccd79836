package chaosllm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake provider. Create it with New; it is an http.Handler.
type Server struct {
	now    func() time.Time
	logger *slog.Logger
	mux    *http.ServeMux

	mu         sync.Mutex
	scenario   Scenario
	phase      int       // index of the current phase
	phaseStart time.Time // when the current phase began
	phaseReqs  int       // matching requests seen in the current phase
	stats      map[statKey]int
	seq        int
}

type statKey struct{ endpoint, key, outcome string }

// Options configures a Server; the zero value is usable.
type Options struct {
	Now    func() time.Time // nil: time.Now
	Logger *slog.Logger     // nil: discard
}

// New returns a server that follows sc.
func New(sc Scenario, o Options) (*Server, error) {
	if err := sc.validate(); err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{now: o.Now, logger: o.Logger, stats: map[statKey]int{}}
	s.setScenario(sc)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.openAI)
	s.mux.HandleFunc("POST /v1/messages", s.anthropic)
	s.mux.HandleFunc("GET /stats", s.getStats)
	s.mux.HandleFunc("PUT /admin/scenario", s.putScenario)
	s.mux.HandleFunc("POST /admin/reset", s.reset)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) setScenario(sc Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenario = sc
	s.phase, s.phaseStart, s.phaseReqs = 0, s.now(), 0
}

// KeyID is how /stats names a key: the start of its SHA-256, never the key.
func KeyID(key string) string {
	if key == "" {
		return "none"
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:12]
}

// decision is what one request gets.
type decision struct {
	phase   string
	latency time.Duration
	fault   *Fault
}

// decide advances the timeline and picks the fault for one request.
func (s *Server) decide(endpoint string) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ph := s.scenario.Phases
	for s.phase < len(ph)-1 {
		p := ph[s.phase]
		overTime := p.Duration > 0 && now.Sub(s.phaseStart) >= time.Duration(p.Duration)
		overCount := p.Requests > 0 && s.phaseReqs >= p.Requests
		if !overTime && !overCount {
			break
		}
		s.phase++
		s.phaseReqs = 0
		s.phaseStart = now
	}
	if len(ph) == 0 {
		return decision{}
	}
	p := ph[s.phase]
	if p.Endpoint != "" && p.Endpoint != endpoint {
		return decision{}
	}
	s.phaseReqs++
	d := decision{phase: p.Name, latency: time.Duration(p.Latency)}
	if f := p.Fault; f != nil {
		rate := f.Rate
		if rate == 0 {
			rate = 1
		}
		// every 1/rate-th request: request n faults when floor(n*rate) grows
		n := s.phaseReqs
		if int(float64(n)*rate) > int(float64(n-1)*rate) {
			d.fault = f
		}
	}
	return d
}

func (s *Server) count(endpoint, key, outcome string) {
	s.mu.Lock()
	s.stats[statKey{endpoint, KeyID(key), outcome}]++
	s.mu.Unlock()
}

// Stats is the document GET /stats returns.
type Stats struct {
	Phase string      `json:"phase"`
	Total int         `json:"total"`
	Calls []StatsLine `json:"calls"`
}

// StatsLine counts calls to one endpoint with one key that ended one way.
type StatsLine struct {
	Endpoint string `json:"endpoint"`
	Key      string `json:"key"`     // KeyID of the key
	Outcome  string `json:"outcome"` // "ok", "unauthorized", "status_503", ...
	Count    int    `json:"count"`
}

// Snapshot returns the counters.
func (s *Server) Snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Calls: []StatsLine{}}
	if len(s.scenario.Phases) > 0 {
		st.Phase = s.scenario.Phases[s.phase].Name
	}
	for k, n := range s.stats {
		st.Calls = append(st.Calls, StatsLine{k.endpoint, k.key, k.outcome, n})
		st.Total += n
	}
	sort.Slice(st.Calls, func(i, j int) bool {
		a, b := st.Calls[i], st.Calls[j]
		if a.Endpoint != b.Endpoint {
			return a.Endpoint < b.Endpoint
		}
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Outcome < b.Outcome
	})
	return st
}

// Count sums the calls matching endpoint, key id and outcome; an empty
// argument matches any.
func (st Stats) Count(endpoint, key, outcome string) int {
	n := 0
	for _, l := range st.Calls {
		if (endpoint == "" || l.Endpoint == endpoint) && (key == "" || l.Key == key) && (outcome == "" || l.Outcome == outcome) {
			n += l.Count
		}
	}
	return n
}

func (s *Server) getStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Snapshot())
}

func (s *Server) putScenario(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sc, err := ParseScenario(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.setScenario(sc)
	s.logger.Info("scenario replaced", "phases", len(sc.Phases))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) reset(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.stats = map[statKey]int{}
	s.phase, s.phaseStart, s.phaseReqs = 0, s.now(), 0
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// keyOf reads the API key: Authorization: Bearer (OpenAI, Anthropic SDK v2)
// or x-api-key (Anthropic SDK v1).
func keyOf(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimPrefix(a, "Bearer ")
	}
	return ""
}

func (s *Server) keyAccepted(key string) bool {
	if key == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.scenario.Keys) == 0 {
		return true
	}
	for _, k := range s.scenario.Keys {
		if k == key {
			return true
		}
	}
	return false
}

// wait sleeps for the phase's latency unless the client goes away first.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func setRetryAfter(w http.ResponseWriter, d Duration) {
	if d <= 0 {
		return
	}
	dur := time.Duration(d)
	w.Header().Set("retry-after-ms", strconv.FormatInt(dur.Milliseconds(), 10))
	secs := int64((dur + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
}

// nextID is the request id of the next answer.
func (s *Server) nextID(endpoint string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("req_%s_%d", endpoint, s.seq)
}
