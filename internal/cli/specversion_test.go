package cli_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/testenv"
)

// spec show --version 0 (or a negative version) is refused on one line,
// exit 2, instead of showing the latest; without --version it shows the
// latest, over Redis and through the dashboard's API, whose ?version=0 is
// a 400.
func TestSpecShowRefusesVersionZero(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	one := writeFile(t, "one.yaml", "name: research\nsteps:\n  - { id: search, route: solo, prompt: \"find {{ .Input.q }}\" }\n")
	two := writeFile(t, "two.yaml", "name: research\nsteps:\n  - { id: search, route: solo, prompt: \"look up {{ .Input.q }}\" }\n")
	for _, f := range []string{one, two} {
		if r := run(t, cli.Enqueue, vars, "spec", "put", "research", f, "--config", cfg); r.code != 0 {
			t.Fatalf("put: exit %d, err %q", r.code, r.err)
		}
	}
	url := serveAPI(t, e, "api-token")
	server := map[string]string{"AGENTQ_SERVER": url, "AGENTQ_DASHBOARD_TOKEN": "api-token"}
	for _, via := range []struct {
		name string
		vars map[string]string
		args []string
	}{{"redis", vars, []string{"--config", cfg}}, {"api", server, nil}} {
		for _, v := range []string{"0", "-1"} {
			r := run(t, cli.Enqueue, via.vars, append([]string{"spec", "show", "research", "--version", v}, via.args...)...)
			if r.code != 2 || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, "--version "+v+" is not a version") || r.out != "" {
				t.Errorf("%s: spec show --version %s: exit %d, out %q, err %q: want exit 2 and one line", via.name, v, r.code, r.out, r.err)
			}
		}
		r := run(t, cli.Enqueue, via.vars, append([]string{"spec", "show", "research"}, via.args...)...)
		if r.code != 0 || !strings.Contains(r.out, "# research version 2") {
			t.Errorf("%s: spec show (the latest): exit %d, out %q, err %q", via.name, r.code, r.out, r.err)
		}
	}
	get := func(query string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/api/v1/specs/research"+query, nil)
		req.Header.Set("Authorization", "Bearer api-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	for _, q := range []string{"?version=0", "?version=-3", "?version=", "?version=x"} {
		if code, body := get(q); code != 400 || body["code"] != "bad_version" {
			t.Errorf("GET %s: %d %v: want 400 bad_version", q, code, body)
		}
	}
	if code, body := get(""); code != 200 || body["version"] != float64(2) {
		t.Errorf("GET without version: %d %v: want 200, version 2", code, body)
	}
	if code, body := get("?version=1"); code != 200 || body["version"] != float64(1) {
		t.Errorf("GET ?version=1: %d %v: want 200, version 1", code, body)
	}
}
