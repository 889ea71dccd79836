package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// The pages show a bidirectional override in what users and providers
// wrote (an input rendered into an approval's message, a provider's error
// on a dead step) as its escape, \u202e, never raw: raw, it would show the
// text after it reversed.
func TestPagesShowBidiOverridesEscaped(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 400, Message: "bad parameter \u202etxt.exe"}}, {}}}})
	dead := e.Submit(t, e.Spec("name: page\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	e.Wait(t, dead, 15*time.Second, store.StateBlocked)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", tasks.TaskID(dead, "s"))
		return err == nil && info.State == asynq.TaskStateArchived, "step not archived"
	})
	waiting := e.Submit(t, e.Spec("name: pay\ninput: { payee: \"Ada \\u202Eevil\\u2066 \\u200f\" }\nsteps:\n  - { id: ok, approve: { message: \"Pay {{ .Input.payee }}?\" } }\n"))
	e.Wait(t, waiting, 15*time.Second, store.StateWaiting)

	d := serveDash(t, e, dashboard.Options{})
	for _, c := range []struct{ path, want string }{
		{"/workflows/" + waiting, `Pay Ada \u202eevil\u2066 \u200f?`},
		{"/workflows/" + dead, `bad parameter \u202etxt.exe`},
		{"/dlq", `\u202etxt.exe`},
		{"/dlq/" + dead + ":s", `\u202etxt.exe`},
		{"/workflows", "pay"},
	} {
		r := d.do(t, call{Path: c.path})
		if r.Code != 200 {
			t.Fatalf("%s: %d %s", c.path, r.Code, r.Body)
		}
		if i := strings.IndexAny(r.Body, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"); i >= 0 {
			t.Errorf("%s shows a bidi character raw: …%s…", c.path, r.Body[max(0, i-60):min(len(r.Body), i+60)])
		}
		if !strings.Contains(r.Body, c.want) {
			t.Errorf("%s does not show %q", c.path, c.want)
		}
	}
}
