package spec

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WaitForSpec makes a step a signal step (wait_for:): it waits, holding
// no worker, until a signal of that name whose match value equals its
// rendered match is sent (enqueue signal, POST /api/v1/signals,
// Client.Signal); the signal's data is its output. No signal within the
// timeout dead-letters the step (an optional one lets its workflow go on).
type WaitForSpec struct {
	// Signal is the name the step waits for ("payment.succeeded").
	Signal string `yaml:"signal" json:"signal"`
	// Match is a template over .Input and .Steps: only a signal sent with
	// this value completes the step ("{{ .Input.order_id }}"). Empty: a
	// signal sent with an empty match.
	Match string `yaml:"match" json:"match,omitempty"`
	// Timeout dead-letters the step if no signal came: 1s to
	// limits.max_wait (left out: DefaultSignalTimeout; 0s is refused).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// DefaultSignalTimeout is how long a signal step waits by default.
const DefaultSignalTimeout = 24 * time.Hour

// MaxSignalName and MaxSignalMatch bound a signal's name and its
// rendered match value, in bytes.
const (
	MaxSignalName  = 200
	MaxSignalMatch = 1024
)

var signalNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)

// ValidSignalName reports whether name can name a signal: a letter or
// digit, then letters, digits and _ . : / -, at most MaxSignalName bytes.
func ValidSignalName(name string) bool {
	return len(name) <= MaxSignalName && signalNamePattern.MatchString(name)
}

// SignalTimeout is how long w waits for its signal: its timeout, else
// DefaultSignalTimeout.
func SignalTimeout(w *WaitForSpec) time.Duration {
	if w.Timeout > 0 {
		return time.Duration(w.Timeout)
	}
	return DefaultSignalTimeout
}

// MatchTemplate is a signal step's parsed match template (nil: empty).
func MatchTemplate(st *Step) *Template { return st.matchT }

// signalKind is a step that waits for a signal (wait_for:).
type signalKind struct{}

func (signalKind) Name() string { return KindSignal }

func (signalKind) Claims(st *Step) bool { return st.WaitFor != nil }

func (signalKind) Takes(*Step) ([]string, string) {
	return []string{"wait_for"}, "a signal step (wait_for:)"
}

func (signalKind) Check(_ *Spec, st *Step, where string, lim Limits, bad ProblemFunc) {
	w, line := st.WaitFor, lineOr(st.fieldLines["wait_for"], st.line)
	if !ValidSignalName(w.Signal) {
		bad(line, where+".wait_for.signal", "%q is not a signal name (a letter or digit, then letters, digits, _ . : / -, at most %d)", w.Signal, MaxSignalName)
	}
	checkWait(w.Timeout, st.hasKey("wait_for", "timeout"), DefaultSignalTimeout, lim, line, where+".wait_for.timeout", bad)
	if st.ForEach != "" {
		bad(lineOr(st.fieldLines["for_each"], st.line), where+".for_each", "is not for a signal step (wait_for:): one step waits for one signal")
	}
}

func (signalKind) Prepare(st *Step) (err error) {
	st.matchT, err = parseTemplate(st.ID+".wait_for.match", st.WaitFor.Match)
	return err
}

func (signalKind) Need(*Step, Resolved) (string, string) { return "", "" } // a sender, not a worker's function

func (signalKind) JSONOutput(*Step) bool { return true } // the signal's data

func (signalKind) WaitsFor() string { return WaitSignal }

func (signalKind) Input(ctx context.Context, st *Step, data TemplateData) (system, prompt string) {
	m, err := RenderData(ctx, st.matchT, data)
	if err != nil {
		return "", "(cannot render the match: " + err.Error() + ")"
	}
	return "", SignalWaitText(st.WaitFor.Signal, m)
}

// SignalWaitText is what a signal step waiting for signal name with match
// value m shows (status, its event, its dead letter).
func SignalWaitText(name, m string) string {
	return "waits for signal " + name + " matching " + quoteMatch(m)
}

func quoteMatch(m string) string {
	if len(m) > 160 {
		m = strings.ToValidUTF8(m[:160], "") + "…"
	}
	return strconv.Quote(m)
}

// waitMatch is a signal step's match template ("" for other steps), for
// the submit's check of what templates read.
func waitMatch(st *Step) string {
	if st.WaitFor == nil {
		return ""
	}
	return st.WaitFor.Match
}

// checkMatchInput refuses a signal step's match that reads only the input
// and a field the input lacks (CheckInput); other steps pass.
func checkMatchInput(ctx context.Context, s *Spec, st *Step, where string) error {
	if st.WaitFor == nil || st.WaitFor.Match == "" {
		return nil
	}
	return checkInputOnly(ctx, s, st.matchT, st.ID+".wait_for.match", st.WaitFor.Match, where+".wait_for.match")
}
