package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// The workflow page links a child workflow step to its child, and a child
// to the step that started it; the API's status carries both links.
func TestPagesLinkParentsAndChildren(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	d := serveDash(t, e, dashboard.Options{})
	if _, err := e.Client.PutSpec(t.Context(), "greet", e.Spec("name: greet\nsteps:\n  - { id: hi, route: solo, prompt: \"hello {{ .Input.who }}\" }\n")); err != nil {
		t.Fatal(err)
	}
	id := e.Submit(t, e.Spec("name: parent\nsteps:\n  - { id: sub, workflow: { spec: greet, input: { who: Ada } } }\n"))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	child := wf.Steps[0].Child
	if child == "" {
		t.Fatalf("the step names no child: %+v", wf.Steps[0])
	}
	if page := d.do(t, call{Path: "/workflows/" + id}); !strings.Contains(page.Body, `href="/workflows/`+child+`"`) {
		t.Fatalf("the parent's page does not link its child %s:\n%s", child, page.Body)
	}
	if page := d.do(t, call{Path: "/workflows/" + child}); !strings.Contains(page.Body, `href="/workflows/`+id+`#step-sub"`) {
		t.Fatalf("the child's page does not link its parent %s:\n%s", id, page.Body)
	}
	r := d.do(t, call{Path: "/api/v1/workflows/" + child})
	if !strings.Contains(r.Body, `"parent":{"workflow":"`+id+`","step":"sub"}`) {
		t.Fatalf("the child's status: %s", r.Body)
	}
	if r := d.do(t, call{Path: "/api/v1/workflows/" + id}); !strings.Contains(r.Body, `"child":"`+child+`"`) {
		t.Fatalf("the parent's status: %s", r.Body)
	}
}
