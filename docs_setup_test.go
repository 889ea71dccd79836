package agentq_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
)

// setup prepares what a block's commands need: "docs-test: setup NAME"
// before the block names it.
type setup struct {
	block func(s *sandbox)                              // before the block's first command
	each  func(s *sandbox)                              // before each command (a fresh workflow for each)
	check func(s *sandbox, c runCommand, output string) // after each command that exited 0
}

// setups are the setups a doc may name.
var setups = map[string]setup{
	// a worker serving the sandbox's agentq.yaml
	"worker": {block: func(s *sandbox) { s.startWorker() }},
	// npx on PATH (the reference MCP server's): the block is skipped
	// without it, except in CI, which must have it
	"npx": {block: func(s *sandbox) {
		if _, err := exec.LookPath("npx"); err != nil {
			if os.Getenv("CI") == "true" {
				s.t.Fatal("npx is not on PATH: CI must have Node.js to run the reference MCP server")
			}
			s.t.Skip("npx is not on PATH")
		}
	}},
	// a worker, and before each command a workflow (approval.yaml, the
	// page's spec) whose step review waits for a decision, and so does
	// the workflow: wf_abc123. The decision is the step's output:
	// approved, the comment, by cli.
	"approval": {
		block: func(s *sandbox) { s.startWorker() },
		each: func(s *sandbox) {
			id := s.submit("approval.yaml", "--no-check", "--input", "team=north")
			s.waitStep(id, "review", "waiting")
			s.waitWorkflow(id, "waiting")
			s.subs["wf_abc123"] = id
		},
		check: func(s *sandbox, c runCommand, out string) {
			wf, err := s.client().Status(s.t.Context(), s.subs["wf_abc123"])
			if err != nil {
				s.t.Fatal(err)
			}
			var decision struct {
				Approved bool   `json:"approved"`
				Comment  string `json:"comment"`
				By       string `json:"by"`
				At       string `json:"at"`
			}
			for _, st := range wf.Steps {
				if st.ID == "review" {
					if err := json.Unmarshal([]byte(st.Output), &decision); err != nil {
						s.t.Fatalf("review's output %q: %v", st.Output, err)
					}
				}
			}
			want := !strings.Contains(c.Text, "--reject")
			if decision.Approved != want || decision.By != "cli" || decision.At == "" || !strings.Contains(c.Text, `"`+decision.Comment+`"`) {
				s.t.Errorf("%s: review's output %+v", c.Text, decision)
			}
		},
	},
	// a worker, and before each command a workflow blocked on its step
	// summary, dead-lettered (a server error, no retries): wf_abc. A
	// discard fails the workflow.
	"dead-letter": {
		block: func(s *sandbox) { s.startWorker() },
		each: func(s *sandbox) {
			id := s.submit("summary.yaml")
			s.waitStep(id, "summary", "dead")
			s.waitWorkflow(id, "blocked")
			s.subs["wf_abc"] = id
		},
		check: func(s *sandbox, c runCommand, out string) {
			if strings.Contains(c.Text, "discard") {
				s.waitWorkflow(s.subs["wf_abc"], "failed")
			}
		},
	},
	// a worker and a completed workflow whose last step is report:
	// wf_abc123; the rerun runs again from report, as run 2
	// (generation 1)
	"completed-report": {
		block: func(s *sandbox) {
			s.startWorker()
			id := s.submit("report.yaml")
			s.waitWorkflow(id, "completed")
			s.subs["wf_abc123"] = id
		},
		check: func(s *sandbox, c runCommand, out string) {
			if strings.Contains(c.Text, "rerun") {
				s.waitWorkflow(s.subs["wf_abc123"], "completed")
			}
			if strings.Contains(c.Text, "--json") && !strings.Contains(out, `"generation": 1`) {
				s.t.Errorf("%s: no \"generation\": 1 in\n%s", c.Text, out)
			}
		},
	},
	// a worker with the page's schedules (its agentq.yaml section) that
	// has run heartbeat, and a dashboard for --server http://agentq:8080;
	// each listing names heartbeat, with its holder
	"schedules": {
		block: func(s *sandbox) {
			s.startWorker()
			s.startDashboard()
			c := s.client()
			poll.Until(s.t, 30*time.Second, func() (bool, string) {
				list, err := c.Schedules(s.t.Context())
				for _, x := range list {
					if x.Name == "heartbeat" && x.Holder != "" {
						return true, ""
					}
				}
				return false, fmt.Sprintf("setup: heartbeat has not run: %+v %v", list, err)
			})
		},
		check: func(s *sandbox, c runCommand, out string) {
			if !strings.Contains(out, "heartbeat") || !strings.Contains(out, "@every 10s") || !strings.Contains(out, "ping") {
				s.t.Errorf("%s: heartbeat (@every 10s, ping) not listed:\n%s", c.Text, out)
			}
		},
	},
	// shardnames writes worker.keda.shardNames.search: six names
	"shard-names": {check: func(s *sandbox, c runCommand, out string) {
		data, err := os.ReadFile(filepath.Join(s.dir, "shards.yaml"))
		if err != nil {
			s.t.Fatal(err)
		}
		var v struct {
			Worker struct {
				Keda struct {
					ShardNames map[string][]string `yaml:"shardNames"`
				} `yaml:"keda"`
			} `yaml:"worker"`
		}
		if err := yaml.Unmarshal(data, &v); err != nil || len(v.Worker.Keda.ShardNames["search"]) != 6 {
			s.t.Errorf("%s wrote %v:\n%s", c.Text, err, data)
		}
	}},
	// the README's three terminals: chaosllm and a worker on
	// examples/local.yaml
	"quickstart": {block: func(s *sandbox) {
		addr := "127.0.0.1:" + strconv.Itoa(freeTCPPort(s.t))
		s.vars = append(s.vars, "CHAOSLLM_URL=http://"+addr)
		s.start("setup: chaosllm", "chaosllm", "chaosllm --addr "+addr)
		s.start("setup: a worker", "worker", "worker --config examples/local.yaml")
	}},
	// a worker, and a dashboard for --server http://agentq:8080
	"dashboard": {block: func(s *sandbox) {
		s.startWorker()
		s.startDashboard()
	}},
	// a worker; a submit with an idempotency key, run again, prints the
	// same workflow, "existing": true
	"idempotent-submit": {
		block: func(s *sandbox) { s.startWorker() },
		check: func(s *sandbox, c runCommand, out string) {
			again, err := s.sh(s.rewrite(c.run), time.Minute)
			if err != nil {
				s.t.Fatalf("%s run again: %v\n%s", c.Text, err, again)
			}
			var first, second struct {
				ID       string `json:"id"`
				Existing bool   `json:"existing"`
			}
			if err := json.Unmarshal([]byte(out), &first); err != nil {
				s.t.Fatalf("%s: not one JSON document (%v):\n%s", c.Text, err, out)
			}
			if err := json.Unmarshal([]byte(lastJSON(again)), &second); err != nil {
				s.t.Fatalf("%s run again: not JSON (%v):\n%s", c.Text, err, again)
			}
			if first.Existing || !second.Existing || first.ID == "" || second.ID != first.ID {
				s.t.Errorf("%s twice: %+v then %+v; want the same id, existing false then true", c.Text, first, second)
			}
		},
	},
}

// lastJSON is the JSON document at the end of out (stderr's lines come
// first).
func lastJSON(out string) string {
	if i := strings.Index(out, "{"); i >= 0 {
		return out[i:]
	}
	return out
}

// newDocsEnv starts what the blocks share: two fake providers, one that
// answers and one that fails.
func newDocsEnv(t *testing.T, bin string) *docsEnv {
	t.Helper()
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := chaosllm.New(chaosllm.Scenario{}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	failing, err := chaosllm.New(chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 500}}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &docsEnv{bin: bin, repo: repo, chaos: testenv.ServeChaos(t, ok), failing: testenv.ServeChaos(t, failing)}
}

// fixtureFiles are the files every block's directory has: agentq.yaml
// (the configuration enqueue, worker and dashboard read there by
// default) and the specs and data the docs' commands name.
func fixtureFiles(env *docsEnv) map[string]string {
	return map[string]string{
		"agentq.yaml": fmt.Sprintf(`# written by the docs test (docs_setup_test.go)
providers:
  - { name: openai, kind: openai, base_url: "%[1]s/v1", keys: ["sk-docs-openai-1", "sk-docs-openai-2"], timeout: 10s }
  - { name: anthropic, kind: anthropic, base_url: "%[1]s", keys: ["sk-docs-anthropic-1"], timeout: 10s }
  - { name: broken, kind: openai, base_url: "%[2]s/v1", keys: ["sk-docs-broken-1"], timeout: 10s }
routes:
  default: { strategy: ordered, targets: [ { provider: openai, model: gpt-docs }, { provider: anthropic, model: claude-docs } ] }
  report: { strategy: ordered, targets: [ { provider: anthropic, model: claude-docs }, { provider: openai, model: gpt-docs } ] }
  broken: { targets: [ { provider: broken, model: gpt-broken } ] }
worker:
  concurrency: 8
  queues: { default: 1 }
retention: 1h
`, env.chaos, env.failing),
		"report.yaml": `name: report
steps:
  - id: figures
    route: default
    prompt: "List last quarter's sales by region."
  - id: report
    depends_on: [figures]
    route: report
    prompt: "Write a short report on these figures: {{ .Steps.figures.Output }}"
`,
		"order.yaml": `name: order
input: { id: "0" }
steps:
  - id: confirm
    route: default
    prompt: "Write the confirmation of order {{ .Input.id }}."
`,
		"research.yaml": `name: research
input: { topic: "the Q3 figures" }
steps:
  - id: research
    route: default
    prompt: "Research {{ .Input.topic }}."
`,
		"summary.yaml": `name: summary
steps:
  - id: summary
    route: broken
    max_retries: 0
    prompt: "Summarize the quarter."
`,
		"event.json": `{"amount": 1999}` + "\n",
		"specs/report.yaml": `name: report
input: { region: all, top: 5 }
steps:
  - id: report
    route: default
    prompt: "The {{ .Input.top }} best customers of {{ .Input.region }}."
`,
		"specs/heartbeat.yaml": `name: ping
steps:
  - id: ping
    route: default
    prompt: "ping"
`,
	}
}

// startDashboard starts the dashboard binary on a free port, which
// stands for the docs' http://agentq:8080.
func (s *sandbox) startDashboard() {
	s.t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freeTCPPort(s.t))
	s.start("setup: the dashboard", "dashboard", "dashboard --addr "+addr)
	s.subs["http://agentq:8080"] = "http://" + addr
}

// startWorker starts the worker binary on the sandbox's agentq.yaml.
func (s *sandbox) startWorker() {
	s.t.Helper()
	s.start("setup: a worker", "worker", "worker")
}

// submit submits a spec file with enqueue and returns the workflow's id.
func (s *sandbox) submit(file string, args ...string) string {
	s.t.Helper()
	out := s.enqueue(append([]string{file, "--json"}, args...)...)
	var sub struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(lastJSON(out)), &sub); err != nil || sub.ID == "" {
		s.t.Fatalf("setup: enqueue %s --json: %v\n%s", file, err, out)
	}
	return sub.ID
}

// client is an SDK client on the sandbox's database, for the setups'
// waits (a process per poll would cost more than the commands).
func (s *sandbox) client() *agentq.Client {
	s.t.Helper()
	if s.sdk == nil {
		cfg, err := agentq.ParseConfig("docs.yaml", []byte(fmt.Sprintf("redis: { url: %q }\n", s.db.URL())))
		if err != nil {
			s.t.Fatal(err)
		}
		if s.sdk, err = agentq.NewClient(s.t.Context(), cfg); err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { s.sdk.Close() })
	}
	return s.sdk
}

// waitStep waits until the workflow's step is in state.
func (s *sandbox) waitStep(id, step, state string) {
	s.t.Helper()
	c := s.client()
	poll.Until(s.t, 30*time.Second, func() (bool, string) {
		wf, err := c.Status(s.t.Context(), id)
		if err != nil {
			return false, fmt.Sprintf("setup: status of %s: %v", id, err)
		}
		for _, x := range wf.Steps {
			if x.ID == step && x.State == state {
				return true, ""
			}
		}
		return false, fmt.Sprintf("setup: %s's step %s is not %s: %+v", id, step, state, wf.Steps)
	})
}

// waitWorkflow waits until the workflow is in state.
func (s *sandbox) waitWorkflow(id, state string) {
	s.t.Helper()
	c := s.client()
	poll.Until(s.t, 30*time.Second, func() (bool, string) {
		wf, err := c.Status(s.t.Context(), id)
		if err != nil {
			return false, fmt.Sprintf("setup: status of %s: %v", id, err)
		}
		return wf.State == state, fmt.Sprintf("setup: %s is %s, not %s: %+v", id, wf.State, state, wf.Steps)
	})
}
