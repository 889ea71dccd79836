package cli_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/testenv"
)

// spec put of a spec whose workflow: step names a spec not stored yet
// stores it and warns, naming the child (specs may name each other: the
// child is put next), over Redis and through the dashboard's API; a
// submit of it is refused until the child is stored. A spec naming itself
// is stored without a warning.
func TestSpecPutWarnsOfAChildSpecNotStoredYet(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	parent := writeFile(t, "parent.yaml", "name: parent\nsteps:\n  - { id: sub, workflow: { spec: kid } }\n")
	self := writeFile(t, "self.yaml", "name: self\nsteps:\n  - { id: again, workflow: { spec: self } }\n")
	kid := writeFile(t, "kid.yaml", "name: kid\nsteps:\n  - { id: a, route: solo, prompt: \"hi\" }\n")
	url := serveAPI(t, e, "api-token")
	server := map[string]string{"AGENTQ_SERVER": url, "AGENTQ_DASHBOARD_TOKEN": "api-token"}
	for _, via := range []struct {
		name, spec string
		vars       map[string]string
		args       []string
	}{{"redis", "parent", vars, []string{"--config", cfg}}, {"api", "parent2", server, nil}} {
		r := run(t, cli.Enqueue, via.vars, append([]string{"spec", "put", via.spec, parent}, via.args...)...)
		if r.code != 0 || !strings.Contains(r.out, via.spec+" version 1 (stored)") ||
			!strings.Contains(r.err, `warning: `+via.spec+` names child spec "kid", not stored yet`) || strings.Count(r.err, "\n") != 1 {
			t.Errorf("%s: spec put of a spec naming a missing child: exit %d, out %q, err %q", via.name, r.code, r.out, r.err)
		}
	}
	if r := run(t, cli.Enqueue, vars, "spec", "put", "self", self, "--config", cfg); r.code != 0 || r.err != "" {
		t.Errorf("spec put of a spec naming itself: exit %d, err %q", r.code, r.err)
	}
	r := run(t, cli.Enqueue, vars, parent, "--config", cfg, "--no-check")
	if r.code == 0 || !strings.Contains(r.err, `no stored spec "kid"`) {
		t.Fatalf("a submit naming a missing child: exit %d, err %q", r.code, r.err)
	}
	if r := run(t, cli.Enqueue, vars, "spec", "put", "kid", kid, "--config", cfg); r.code != 0 || r.err != "" {
		t.Fatalf("spec put kid: exit %d, err %q", r.code, r.err)
	}
	if r := run(t, cli.Enqueue, vars, "spec", "put", "parent", parent, "--config", cfg); r.code != 0 || r.err != "" || !strings.Contains(r.out, "(unchanged)") {
		t.Errorf("spec put of the parent again, its child stored: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if r := run(t, cli.Enqueue, vars, parent, "--config", cfg, "--no-check"); r.code != 0 {
		t.Errorf("a submit once the child is stored: exit %d, err %q", r.code, r.err)
	}
}
