package chaosllm

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
)

// count counts one call and the prompt tokens it brought: a provider
// bills those for calls that failed after reading them, too.
func (s *Server) count(endpoint, key, outcome string, promptTokens int) {
	s.mu.Lock()
	k := statKey{endpoint, KeyID(key), outcome}
	s.stats[k]++
	s.tokens[k] += promptTokens
	s.mu.Unlock()
}

// Stats is the document GET /stats returns.
type Stats struct {
	Phases map[string]string `json:"phases"` // timeline name -> current phase name
	Total  int               `json:"total"`
	Calls  []StatsLine       `json:"calls"`
	// PeakInFlight is the most requests each endpoint (and, as
	// "model:<model>", each model asked for) was answering at
	// once (limit drills read it).
	PeakInFlight map[string]int `json:"peak_in_flight"`
	// StreamChunks is the text chunks each endpoint's streamed answers
	// have sent, each counted once it is flushed to the client (a test
	// reads what a client saw before a stream's last chunk left).
	StreamChunks map[string]int `json:"stream_chunks"`
	// ToolTurns count tool conversations turn by turn, per endpoint, in
	// order of endpoint and turn.
	ToolTurns []ToolTurn `json:"tool_turns"`
}

// ToolTurn counts one turn of the tool conversations on one endpoint:
// requests that offer tools or hold tool calls or results, answered
// normally (not faulted). A request's turn is 1 + the assistant messages
// it holds.
type ToolTurn struct {
	Endpoint string `json:"endpoint"`
	Turn     int    `json:"turn"`
	// Answers is the requests of this turn that were answered.
	Answers int `json:"answers"`
	// Calls is the tool calls those answers made.
	Calls int `json:"calls"`
	// Results is the tool results that came back for this turn's calls
	// (in the requests of the next turn), ErrorResults those of them
	// flagged as errors (Anthropic is_error; OpenAI content that starts
	// with "error:").
	Results      int `json:"results"`
	ErrorResults int `json:"error_results"`
}

type toolTurnKey struct {
	endpoint string
	turn     int
}

// countToolTurn counts an answered request of a tool conversation, the
// calls its answer makes and the results it brought back.
func (s *Server) countToolTurn(ep string, req request, calls int) {
	if !req.toolTalk {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.toolTurnLocked(ep, req.turn)
	t.Answers++
	t.Calls += calls
	if len(req.fresh) > 0 {
		// they answer the calls of the last assistant message, the turn before
		p := s.toolTurnLocked(ep, req.turn-1)
		p.Results += len(req.fresh)
		for _, r := range req.fresh {
			if r.isError {
				p.ErrorResults++
			}
		}
	}
}

func (s *Server) toolTurnLocked(ep string, turn int) *ToolTurn {
	k := toolTurnKey{ep, turn}
	t := s.toolTurns[k]
	if t == nil {
		t = &ToolTurn{Endpoint: ep, Turn: turn}
		s.toolTurns[k] = t
	}
	return t
}

// ToolTurn sums the counts of one turn on endpoint ("" for both).
func (st Stats) ToolTurn(endpoint string, turn int) ToolTurn {
	sum := ToolTurn{Endpoint: endpoint, Turn: turn}
	for _, t := range st.ToolTurns {
		if t.Turn == turn && (endpoint == "" || t.Endpoint == endpoint) {
			sum.Answers += t.Answers
			sum.Calls += t.Calls
			sum.Results += t.Results
			sum.ErrorResults += t.ErrorResults
		}
	}
	return sum
}

// enter and leave count requests in flight per endpoint.
func (s *Server) enter(ep string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[ep]++
	s.peak[ep] = max(s.peak[ep], s.inflight[ep])
}

func (s *Server) leave(ep string) {
	s.mu.Lock()
	s.inflight[ep]--
	s.mu.Unlock()
}

// countChunk counts a streamed text chunk sent on endpoint ep.
func (s *Server) countChunk(ep string) {
	s.mu.Lock()
	s.chunks[ep]++
	s.mu.Unlock()
}

// StatsLine counts calls to one endpoint with one key that ended one way.
type StatsLine struct {
	Endpoint string `json:"endpoint"`
	Key      string `json:"key"`     // KeyID of the key
	Outcome  string `json:"outcome"` // "ok", "unauthorized", "status_503", "reset", ...
	Count    int    `json:"count"`
	// PromptTokens is the prompt tokens those calls brought.
	PromptTokens int `json:"prompt_tokens"`
}

// recordAnswer keeps prompt, answered "ok", while fewer than
// Options.RecordAnswered are kept.
func (s *Server) recordAnswer(prompt string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.answered) < s.recordAnswered {
		s.answered = append(s.answered, prompt)
	}
}

// Answered is the prompts answered "ok" so far (each conversation's last
// user message), in order, as many as Options.RecordAnswered keeps.
func (s *Server) Answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.answered)
}

// Snapshot returns the counters.
func (s *Server) Snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Calls: []StatsLine{}, Phases: map[string]string{}, PeakInFlight: map[string]int{}, StreamChunks: map[string]int{}, ToolTurns: []ToolTurn{}}
	for _, t := range s.toolTurns {
		st.ToolTurns = append(st.ToolTurns, *t)
	}
	sort.Slice(st.ToolTurns, func(i, j int) bool {
		a, b := st.ToolTurns[i], st.ToolTurns[j]
		if a.Endpoint != b.Endpoint {
			return a.Endpoint < b.Endpoint
		}
		return a.Turn < b.Turn
	})
	for ep, n := range s.peak {
		st.PeakInFlight[ep] = n
	}
	for ep, n := range s.chunks {
		st.StreamChunks[ep] = n
	}
	for i, t := range s.lines {
		name := t.Name
		if name == "" {
			name = fmt.Sprintf("timeline %d", i)
		}
		if len(t.Phases) > 0 {
			st.Phases[name] = t.Phases[t.phase].Name
		}
	}
	for k, n := range s.stats {
		st.Calls = append(st.Calls, StatsLine{k.endpoint, k.key, k.outcome, n, s.tokens[k]})
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
