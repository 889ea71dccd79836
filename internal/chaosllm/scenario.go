// Package chaosllm is a fake LLM provider with scripted faults. It speaks
// the OpenAI chat completions and Anthropic messages wire formats, answers
// deterministically from the prompt, and follows a scenario: timelines of
// phases, each with its latency and its faults.
//
// It shares no code with the clients it tests (llmclient, retry, tasks): a
// fake built from the client's own code would agree with it by construction.
package chaosllm

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"
)

// Scenario is what the server does. The zero value accepts any non-empty
// key and answers every request at once.
type Scenario struct {
	// Keys are the accepted API keys; empty accepts any non-empty key.
	Keys []string `yaml:"keys" json:"keys"`
	// HideAuthFailures makes a rejected key get a 500 with an empty body on
	// the chat endpoints, as some providers and proxies do; GET /v1/models
	// still answers 401, so a client can probe.
	HideAuthFailures bool `yaml:"hide_auth_failures" json:"hide_auth_failures"`
	// Seed feeds latency ranges and fault rates drawn at random; 0 means 1.
	Seed uint64 `yaml:"seed" json:"seed"`
	// Phases is the default timeline: it applies to requests that no entry
	// of Timelines matches.
	Phases []Phase `yaml:"phases" json:"phases"`
	// Timelines apply to the requests they match (endpoint and key), each
	// advancing on its own; the first match wins.
	Timelines []Timeline `yaml:"timelines" json:"timelines"`
	// ToolScript is what the model does, turn by turn, with requests that
	// offer tools (both endpoints, plain and streamed). Empty: it calls the
	// first tool offered, with arguments built
	// from its parameters, then answers once the conversation holds a
	// tool result.
	ToolScript []ScriptTurn `yaml:"tool_script" json:"tool_script"`
	// Answers say what to answer to the prompts they match (the first
	// match wins); a prompt none matches gets the default reply.
	Answers []Answer `yaml:"answers" json:"answers"`
}

// Timeline is a sequence of phases for some requests.
type Timeline struct {
	Name string `yaml:"name" json:"name"`
	// Endpoint is "openai", "anthropic" or empty (both).
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Key is the key (its text or its KeyID) the timeline is for; empty: any.
	Key    string  `yaml:"key" json:"key"`
	Phases []Phase `yaml:"phases" json:"phases"`
}

// Phase is one stretch of a timeline. It ends after Requests matching
// requests or after Duration, whichever comes first; the last phase of a
// timeline never ends.
type Phase struct {
	Name     string   `yaml:"name" json:"name"`
	Requests int      `yaml:"requests" json:"requests"` // 0: not bounded by count
	Duration Duration `yaml:"duration" json:"duration"` // 0: not bounded by time
	// Endpoint limits the phase to "openai" or "anthropic"; requests to
	// the other endpoint are answered normally and do not count.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Latency is added before answering: "200ms", or {min: 50ms, max: 2s}
	// drawn uniformly.
	Latency Latency `yaml:"latency" json:"latency"`
	// ChunkEvery paces a streamed answer: the wait before each text chunk
	// after the first, as a model writing slowly sends them (0: at once).
	ChunkEvery Duration `yaml:"chunk_every" json:"chunk_every"`
	// Fault hits every 1/rate-th request, deterministically.
	Fault *Fault `yaml:"fault" json:"fault"`
	// Faults are drawn at random (seeded), each with its own rate; at most
	// one applies to a request. For mixes such as 10% 429 and 5% 500.
	Faults []Fault `yaml:"faults" json:"faults"`
}

// Fault kinds.
const (
	KindStatus      = "status"       // an error status with the provider's error body (default)
	KindEmpty       = "empty"        // an error status with an empty body (default 500)
	KindHTML        = "html"         // an error status with an HTML page (default 502), as a proxy sends
	KindMalformed   = "malformed"    // 200 with a body that is not valid JSON
	KindReset       = "reset"        // the connection is closed without an answer (mid-body for streams)
	KindHang        = "hang"         // the request is accepted and never answered
	KindStreamError = "stream_error" // a 200 stream that carries an error event after a few chunks
	KindRefuse      = "refuse"       // the listener is closed: connections are refused (timeline-wide)
	// Answers that arrive fine (200, well-formed) but are no use to a
	// caller that asked for JSON:
	KindBadJSON       = "bad_json"       // valid JSON that breaks the request's schema
	KindProseJSON     = "prose_json"     // the JSON answer with prose before and after it
	KindTruncatedJSON = "truncated_json" // the JSON answer cut off halfway
)

// Fault is what a request in a phase gets instead of an answer.
type Fault struct {
	Kind string `yaml:"kind" json:"kind"`
	// Status is the HTTP status (kinds status, empty, html).
	Status int `yaml:"status" json:"status"`
	// Rate is the share of requests that get the fault, 0 < Rate <= 1;
	// 0 means 1.
	Rate float64 `yaml:"rate" json:"rate"`
	// Type and Code override the error body's type and code (for example
	// code insufficient_quota on a 429, type overloaded_error in a stream).
	Type string `yaml:"type" json:"type"`
	Code string `yaml:"code" json:"code"`
	// Message overrides the error message (e.g. "maximum context length").
	Message string `yaml:"message" json:"message"`
	// RetryAfter is sent as Retry-After (whole seconds, rounded up) and
	// retry-after-ms.
	RetryAfter Duration `yaml:"retry_after" json:"retry_after"`
	// Pad is how many bytes of filler come before a text_echo body's
	// message, to put the echoed key across a client's cut.
	Pad int `yaml:"pad" json:"pad"`
	// Size is a huge body's size in bytes; 0 means 50 MiB.
	Size int64 `yaml:"size" json:"size"`
	// Echo is how a text_echo body echoes the key: "" whole, "split" in
	// two pieces at Split (0: the middle) with a space between, "base64"
	// base64-encoded, "basic" as "Basic base64(gateway-user:key)".
	Echo string `yaml:"echo" json:"echo"`
	// Split is where "split" cuts the key (bytes from its start).
	Split int `yaml:"split" json:"split"`
	// Chunks is how many chunks of the answer a stream_error or reset
	// stream sends before it fails; 0 means 2.
	Chunks int `yaml:"chunks" json:"chunks"`
}

// Duration is a time.Duration read from a string such as "1.5s".
type Duration time.Duration

// UnmarshalYAML reads "250ms", "2s" and so on.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: bad duration %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Latency is a fixed delay or a uniform range.
type Latency struct {
	Min Duration `yaml:"min" json:"min"`
	Max Duration `yaml:"max" json:"max"`
}

// UnmarshalYAML reads "200ms" or {min: 50ms, max: 2s}.
func (l *Latency) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var d Duration
		if err := d.UnmarshalYAML(n); err != nil {
			return err
		}
		*l = Latency{Min: d, Max: d}
		return nil
	}
	type plain Latency
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*l = Latency(p)
	if l.Max < l.Min {
		return fmt.Errorf("line %d: latency max is under min", n.Line)
	}
	return nil
}

// Fixed is a fixed latency.
func Fixed(d time.Duration) Latency { return Latency{Min: Duration(d), Max: Duration(d)} }

// ParseScenario reads a scenario (YAML or JSON) and checks it.
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return Scenario{}, fmt.Errorf("scenario: %w", err)
	}
	return s, s.validate()
}

// timelines returns the scenario's timelines, the default one last.
func (s Scenario) timelines() []Timeline {
	out := append([]Timeline(nil), s.Timelines...)
	return append(out, Timeline{Name: "default", Phases: s.Phases})
}

func (s Scenario) validate() error {
	if err := validateScript(s.ToolScript); err != nil {
		return err
	}
	if _, err := compileAnswers(s.Answers); err != nil {
		return err
	}
	for ti, tl := range s.timelines() {
		base := "scenario: "
		if ti < len(s.Timelines) {
			base += fmt.Sprintf("timelines[%d].", ti)
			if tl.Endpoint != "" && tl.Endpoint != "openai" && tl.Endpoint != "anthropic" {
				return fmt.Errorf("%sendpoint: %q is not openai or anthropic", base, tl.Endpoint)
			}
		}
		for i, p := range tl.Phases {
			where := fmt.Sprintf("%sphases[%d]", base, i)
			if p.Name != "" {
				where += " (" + p.Name + ")"
			}
			if err := p.validate(where); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p Phase) validate(where string) error {
	switch p.Endpoint {
	case "", "openai", "anthropic":
	default:
		return fmt.Errorf("%s.endpoint: %q is not openai or anthropic", where, p.Endpoint)
	}
	if p.Requests < 0 {
		return fmt.Errorf("%s.requests: cannot be negative", where)
	}
	if p.ChunkEvery > Duration(time.Minute) {
		return fmt.Errorf("%s.chunk_every: %v is over a minute", where, time.Duration(p.ChunkEvery))
	}
	faults := p.Faults
	if p.Fault != nil {
		faults = append([]Fault{*p.Fault}, faults...)
	}
	total := 0.0
	for i, f := range faults {
		fw := fmt.Sprintf("%s.faults[%d]", where, i)
		if p.Fault != nil && i == 0 {
			fw = where + ".fault"
		} else if p.Fault != nil {
			fw = fmt.Sprintf("%s.faults[%d]", where, i-1)
		}
		if err := f.validate(fw); err != nil {
			return err
		}
		if f.Kind == KindRefuse && (p.Requests > 0 || p.Duration == 0 || p.Endpoint != "") {
			return fmt.Errorf("%s: a refuse phase needs a duration, no request count and no endpoint (no request reaches a closed listener)", fw)
		}
		if i > 0 || p.Fault == nil {
			total += f.rate()
		}
	}
	if total > 1.0001 {
		return fmt.Errorf("%s.faults: rates add up to %v, over 1", where, total)
	}
	return nil
}

func (f Fault) rate() float64 {
	if f.Rate == 0 {
		return 1
	}
	return f.Rate
}

func (f Fault) validate(where string) error {
	switch f.Kind {
	case "", KindStatus:
		if f.Status < 400 || f.Status > 599 {
			return fmt.Errorf("%s.status: %d is not an HTTP error status", where, f.Status)
		}
	case KindEmpty, KindHTML, KindTextEcho, KindHuge, KindEndless:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("%s.status: %d is not an HTTP error status", where, f.Status)
		}
	case KindMalformed, KindReset, KindHang, KindStreamError, KindRefuse, KindBadJSON, KindProseJSON, KindTruncatedJSON, KindEmptyAnswer:
		if f.Status != 0 {
			return fmt.Errorf("%s.status: kind %s takes no status", where, f.Kind)
		}
	default:
		return fmt.Errorf("%s.kind: %q is not status, empty, html, text_echo, endless, huge, empty_answer, malformed, reset, hang, stream_error, refuse, bad_json, prose_json or truncated_json", where, f.Kind)
	}
	if f.Pad < 0 || f.Pad > 1<<20 {
		return fmt.Errorf("%s.pad: %d is not in [0, 1048576]", where, f.Pad)
	}
	if f.Size < 0 || f.Size > 1<<34 {
		return fmt.Errorf("%s.size: %d is not in [0, 16 GiB]", where, f.Size)
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("%s.rate: %v is not in (0, 1]", where, f.Rate)
	}
	switch f.Echo {
	case "", "split", "base64", "basic":
	default:
		return fmt.Errorf("%s.echo: %q is not split, base64 or basic", where, f.Echo)
	}
	if f.Echo != "" && f.Kind != KindTextEcho {
		return fmt.Errorf("%s.echo: only a text_echo fault echoes the key", where)
	}
	if f.Split < 0 {
		return fmt.Errorf("%s.split: cannot be negative", where)
	}
	return nil
}

// echoed is the key as the fault echoes it (Echo).
func (f Fault) echoed(key string) string {
	switch f.Echo {
	case "split":
		at := f.Split
		if at == 0 || at >= len(key) {
			at = len(key) / 2
		}
		return key[:at] + " " + key[at:]
	case "base64":
		return base64.StdEncoding.EncodeToString([]byte(key))
	case "basic":
		return "Basic " + base64.StdEncoding.EncodeToString([]byte("gateway-user:"+key))
	}
	return key
}

// statusOf is the status a fault answers with.
func (f Fault) statusOf() int {
	switch {
	case f.Status != 0:
		return f.Status
	case f.Kind == KindEmpty:
		return 500
	case f.Kind == KindHTML:
		return 502
	case f.Kind == KindTextEcho:
		return 401
	case f.Kind == KindHuge:
		return 500
	}
	return 200
}
