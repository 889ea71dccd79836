package chaosllm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
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

	mu       sync.Mutex
	scenario Scenario
	answers  []answerRule // the scenario's, compiled
	lines    []*timelineState
	rng      *rand.Rand
	stats    map[statKey]int
	tokens   map[statKey]int // prompt tokens received, per stats line
	seq      int
	inflight map[string]int // endpoint -> requests being answered now
	peak     map[string]int // endpoint -> most at once since the last reset
	chunks   map[string]int // endpoint -> streamed text chunks sent (flushed)
	// toolTurns count tool conversations per endpoint and turn
	toolTurns map[toolTurnKey]*ToolTurn
	// answered are the first recordAnswered prompts answered "ok"
	recordAnswered int
	answered       []string
}

type timelineState struct {
	Timeline
	phase      int       // index of the current phase
	phaseStart time.Time // when the current phase began
	phaseReqs  int       // matching requests seen in the current phase
}

type statKey struct{ endpoint, key, outcome string }

// Options configures a Server; the zero value is usable.
type Options struct {
	Now    func() time.Time // nil: time.Now
	Logger *slog.Logger     // nil: discard
	// RecordAnswered is how many prompts answered "ok" the server keeps,
	// the first ones, for Answered (a drill names the steps never
	// answered); 0 keeps none.
	RecordAnswered int
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
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RecordAnswered < 0 {
		return nil, fmt.Errorf("chaosllm: options: RecordAnswered %d is negative", o.RecordAnswered)
	}
	s := &Server{now: o.Now, logger: o.Logger, recordAnswered: o.RecordAnswered, stats: map[statKey]int{}, tokens: map[statKey]int{}, inflight: map[string]int{}, peak: map[string]int{}, chunks: map[string]int{},
		toolTurns: map[toolTurnKey]*ToolTurn{}}
	s.setScenario(sc)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.openAI)
	s.mux.HandleFunc("POST /v1/messages", s.anthropic)
	s.mux.HandleFunc("GET /v1/models", s.models)
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
	s.answers, _ = compileAnswers(sc.Answers) // validated by the caller
	s.restartLocked()
}

// answerText is what the scenario answers to prompt on endpoint ep, if it
// says.
func (s *Server) answerText(ep, prompt string) (string, bool) {
	s.mu.Lock()
	rules := s.answers
	s.mu.Unlock()
	return answerFor(rules, ep, prompt)
}

func (s *Server) restartLocked() {
	seed := s.scenario.Seed
	if seed == 0 {
		seed = 1
	}
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.lines = nil
	now := s.now()
	for _, tl := range s.scenario.timelines() {
		s.lines = append(s.lines, &timelineState{Timeline: tl, phaseStart: now})
	}
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
	phase      string
	latency    time.Duration
	chunkEvery time.Duration // the pause before each streamed chunk after the first
	fault      *Fault
}

// advance moves a timeline past the phases that have ended by now.
func (t *timelineState) advance(now time.Time) {
	for t.phase < len(t.Phases)-1 {
		p := t.Phases[t.phase]
		overTime := p.Duration > 0 && now.Sub(t.phaseStart) >= time.Duration(p.Duration)
		overCount := p.Requests > 0 && t.phaseReqs >= p.Requests
		if !overTime && !overCount {
			return
		}
		t.phase++
		t.phaseReqs = 0
		t.phaseStart = now
	}
}

func (t *timelineState) matches(endpoint, key string) bool {
	return (t.Endpoint == "" || t.Endpoint == endpoint) && (t.Key == "" || t.Key == key || t.Key == KeyID(key))
}

// decide advances the matching timeline and picks the fault for a request.
func (s *Server) decide(endpoint, key string) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var t *timelineState
	for _, l := range s.lines {
		if l.matches(endpoint, key) {
			t = l
			break
		}
	}
	if t == nil || len(t.Phases) == 0 {
		return decision{}
	}
	t.advance(now)
	p := t.Phases[t.phase]
	if p.Endpoint != "" && p.Endpoint != endpoint {
		return decision{}
	}
	t.phaseReqs++
	d := decision{phase: p.Name, latency: time.Duration(p.Latency.Min), chunkEvery: time.Duration(p.ChunkEvery)}
	if p.Latency.Max > p.Latency.Min {
		d.latency += time.Duration(s.rng.Int64N(int64(p.Latency.Max - p.Latency.Min)))
	}
	if f := p.Fault; f != nil {
		// every 1/rate-th request: request n faults when floor(n*rate) grows
		n, rate := t.phaseReqs, f.rate()
		if int(float64(n)*rate) > int(float64(n-1)*rate) {
			d.fault = f
			return d
		}
	}
	if len(p.Faults) > 0 {
		x := s.rng.Float64()
		for i := range p.Faults {
			if x < p.Faults[i].rate() {
				d.fault = &p.Faults[i]
				break
			}
			x -= p.Faults[i].rate()
		}
	}
	return d
}

// Refusing reports whether a timeline is in a refuse phase now: the
// listener (see Listen) closes while it is.
func (s *Server) Refusing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, t := range s.lines {
		if len(t.Phases) == 0 {
			continue
		}
		t.advance(now)
		p := t.Phases[t.phase]
		if p.Fault != nil && p.Fault.Kind == KindRefuse {
			return true
		}
	}
	return false
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
	s.logger.Info("scenario replaced", "timelines", len(sc.Timelines), "phases", len(sc.Phases))
	w.WriteHeader(http.StatusNoContent)
}

// SetScenario replaces the scenario and restarts its timelines.
func (s *Server) SetScenario(sc Scenario) error {
	if err := sc.validate(); err != nil {
		return err
	}
	s.setScenario(sc)
	return nil
}

func (s *Server) reset(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.stats, s.tokens = map[statKey]int{}, map[statKey]int{}
	s.peak = map[string]int{}
	s.chunks = map[string]int{}
	s.toolTurns = map[toolTurnKey]*ToolTurn{}
	s.answered = nil
	s.restartLocked()
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

func (s *Server) hideAuth() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scenario.HideAuthFailures
}

// models answers GET /v1/models: the cheap call clients use to probe a key.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	key := keyOf(r)
	if !s.keyAccepted(key) {
		s.count("models", key, "unauthorized", 0)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "invalid api key", "type": "authentication_error", "code": "invalid_api_key"}})
		return
	}
	s.count("models", key, "ok", 0)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]string{"id": "chaos-model", "object": "model"}}})
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
