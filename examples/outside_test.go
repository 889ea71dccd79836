package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

// examples/outside is a worker in a module of its own, as a team outside
// this repository writes one. It imports only the SDK's root package,
// agentqtest and the standard library; its tests unit-test a map instance
// and a fan-in with agentqtest, and run its plan → map → fan-in → report
// (with a tool) workflow on its worker against a real Redis and chaosllm
// over HTTP.
func TestAModuleOutsideUsesOnlyTheSDK(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH: %v", err)
	}
	dir, err := filepath.Abs("outside")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	list := exec.CommandContext(t.Context(), goBin, "list", "-f", `{{join .Imports "\n"}}{{"\n"}}{{join .TestImports "\n"}}`, ".")
	list.Dir, list.Env = dir, env
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		std := !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
		if !std && imp != "github.com/agentq/agentq" && imp != "github.com/agentq/agentq/agentqtest" {
			t.Errorf("the outside module imports %s: a user needs only the root package, agentqtest and the standard library", imp)
		}
	}

	chaos, err := chaosllm.New(chaosllm.Scenario{Answers: []chaosllm.Answer{{Match: "^Plan:", Items: 3, Field: "cities"}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, _ := redistest.New(t)
	run := exec.CommandContext(t.Context(), goBin, append(append([]string{"test"}, raceFlags...), "-count=1", "-v", ".")...)
	run.Dir = dir
	run.Env = append(env, "REDIS_ADDR="+db.Addr, "AGENTQ_REDIS_DB="+strconv.Itoa(db.DB), "PROVIDER_URL="+testenv.ServeChaos(t, chaos))
	out, err = run.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in %s: %v\n%s", dir, err, out)
	}
	for _, name := range []string{"TestResearchAnInstance", "TestMergeTheMap", "TestTheWorkflowRuns"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Errorf("%s did not pass (skipped or missing):\n%s", name, out)
		}
	}
}
