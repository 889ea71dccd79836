package spec

import (
	"context"
	"strings"
	"time"
)

// ApproveSpec makes a step an approval step.
type ApproveSpec struct {
	// Message is what the person is asked: a template over .Input and
	// .Steps, like a prompt.
	Message string `yaml:"message" json:"message"`
	// Timeout turns a missing decision into a rejection: 1s to
	// limits.max_wait (left out: DefaultApprovalTimeout; 0s is refused).
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
}

// DefaultApprovalTimeout is how long an approval step waits by default.
const DefaultApprovalTimeout = 24 * time.Hour

// Decision is an approval step's output.
type Decision struct {
	Approved bool      `json:"approved"`
	Comment  string    `json:"comment"`
	By       string    `json:"by"` // who decided: "cli", "dashboard", "api", or "timeout"
	At       time.Time `json:"at"`
}

// ApprovalTimeout is how long approval a waits for a decision: its
// timeout, else DefaultApprovalTimeout.
func ApprovalTimeout(a *ApproveSpec) time.Duration {
	if a.Timeout > 0 {
		return time.Duration(a.Timeout)
	}
	return DefaultApprovalTimeout
}

// checkApprove checks an approval step: a message, and nothing that would
// make it another kind of step.
func checkApprove(st *Step, where string, lim Limits, bad ProblemFunc) {
	if strings.TrimSpace(st.Approve.Message) == "" {
		bad(st.line, where+".approve.message", "is empty (say what the person decides)")
	}
	checkWait(st.Approve.Timeout, st.hasKey("approve", "timeout"), DefaultApprovalTimeout, lim, lineOr(st.fieldLines["approve"], st.line), where+".approve.timeout", bad)
	if st.ForEach != "" {
		bad(lineOr(st.fieldLines["for_each"], st.line), where+".for_each", "is not for an approval step (approve:): a person decides one step")
	}
}

// approvalKind is a step a person decides (approve:): it parks, waiting,
// until an approval, a rejection or its timeout.
type approvalKind struct{}

func (approvalKind) Name() string { return KindApproval }

func (approvalKind) Claims(st *Step) bool { return st.Approve != nil }

func (approvalKind) Takes(*Step) ([]string, string) {
	return []string{"approve", "route"}, "an approval step (approve:)"
}

func (approvalKind) Check(_ *Spec, st *Step, where string, lim Limits, bad ProblemFunc) {
	checkApprove(st, where, lim, bad)
}

func (approvalKind) Prepare(st *Step) (err error) {
	st.messageT, err = parseTemplate(st.ID+".approve.message", st.Approve.Message)
	return err
}

func (approvalKind) Need(*Step, Resolved) (string, string) { return "", "" } // a person, not a worker

func (approvalKind) JSONOutput(*Step) bool { return true } // the decision

func (approvalKind) WaitsFor() string { return WaitApproval }

func (approvalKind) Input(ctx context.Context, st *Step, data TemplateData) (system, prompt string) {
	msg, err := RenderData(ctx, st.messageT, data)
	if err != nil {
		return "", "(cannot render: " + err.Error() + ")"
	}
	return "", msg
}
