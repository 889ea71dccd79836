package agentq_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/agentq/agentq"

// importRules are docs/architecture.md's import rules: for each package, the
// module's packages it may import (its non-test files). A package missing
// from the table may import anything but must be added when it is written.
var importRules = map[string][]string{
	"retry":              {},
	"redact":             {},
	"internal/record":    {},
	"internal/defaults":  {},
	"llmclient":          {"internal/defaults", "internal/tracegate", "retry", "redact"},
	"internal/router":    {"internal/breaker", "internal/defaults", "internal/tracegate", "llmclient", "redact", "retry"},
	"internal/breaker":   {},
	"internal/store":     {"internal/breaker", "internal/defaults", "internal/record", "retry"},
	"tasks":              {},
	"internal/spec":      {"internal/defaults", "internal/hookcheck", "internal/problem", "llmclient", "retry"},
	"internal/flow":      {"internal/record", "internal/router", "internal/shard", "internal/spec", "internal/store", "internal/tracegate", "internal/webhook", "tasks"},
	"internal/engine":    {"internal/defaults", "internal/flow", "internal/record", "internal/router", "internal/spec", "internal/store", "llmclient", "retry", "tasks"},
	"internal/producer":  {"internal/defaults", "internal/flow", "internal/record", "internal/shard", "internal/spec", "internal/store", "retry", "tasks"},
	"internal/shard":     {},
	"internal/webhook":   {"internal/defaults", "internal/hookcheck", "redact", "retry"},
	"internal/hookcheck": {},
	"internal/tracegate": {},
	".":                  {"internal/apiclient", "internal/client", "internal/config", "internal/engine", "internal/flow", "internal/producer", "internal/record", "internal/sdkconfig", "internal/spec", "internal/stepfunc", "internal/worker", "llmclient"},
	"internal/sdkconfig": {"internal/config"},
	"internal/stepfunc":  {"internal/engine"},
	"internal/chaosllm":  {}, // shares no code with the clients it tests
	"internal/llmtest":   {"internal/chaosllm", "llmclient"},
	"internal/schedule":  {"internal/config", "internal/problem", "internal/producer", "internal/spec", "internal/store"},
	"agentqtest":         {".", "internal/engine", "internal/router", "internal/spec", "internal/stepfunc", "llmclient"},
	"embedded":           {".", "internal/chaosllm"},
	"examples/analyst":   {".", "embedded"},
	"internal/mcpserve":  {"internal/flow", "internal/problem", "internal/producer", "internal/record", "internal/spec"},

	// the worker's MCP client (the engine's interface over the SDK), and an
	// MCP server for tests (the SDK alone)
	"internal/mcptool":         {"internal/breaker", "internal/config", "internal/engine", "internal/router", "retry"},
	"internal/mcptool/mcptest": {},
}

// imports lists the imports of the non-test Go files in dir, by file.
func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = []string{}
		for _, im := range af.Imports {
			out[f] = append(out[f], strings.Trim(im.Path.Value, `"`))
		}
	}
	return out
}

// TestImportRules holds the package layering: the policy packages import
// nothing of agentq's, the provider layer knows no queue, the store knows
// no provider, and the example uses public packages only.
func TestImportRules(t *testing.T) {
	for pkg, allowed := range importRules {
		ok := map[string]bool{}
		for _, a := range allowed {
			ok[a] = true
		}
		files := imports(t, pkg)
		if len(files) == 0 {
			t.Errorf("%s: no Go files (the table names a package that moved)", pkg)
		}
		for f, paths := range files {
			for _, path := range paths {
				rel, mine := strings.CutPrefix(path, module)
				if !mine {
					continue
				}
				rel = strings.TrimPrefix(rel, "/")
				if rel == "" {
					rel = "."
				}
				if !ok[rel] {
					t.Errorf("%s imports %s, which docs/architecture.md's rules do not allow it", f, path)
				}
			}
		}
	}
}

// The engine (what a worker runs: the handler, settling, fan-in, the
// reconciler, deadlines) and the producer client (submit, status, cancel,
// rerun, dead letters, queues) share the spec and the flow below them and
// reach each other by no path: neither imports the other, directly or
// through another of the module's packages.
func TestEngineAndProducerStandApart(t *testing.T) {
	for _, c := range [][2]string{{"internal/engine", "internal/producer"}, {"internal/producer", "internal/engine"}} {
		seen := map[string]bool{c[0]: true}
		for queue := []string{c[0]}; len(queue) > 0; queue = queue[1:] {
			for f, paths := range imports(t, queue[0]) {
				for _, path := range paths {
					rel, mine := strings.CutPrefix(path, module+"/")
					if !mine || seen[rel] {
						continue
					}
					if rel == c[1] {
						t.Errorf("%s reaches %s (through %s)", c[0], c[1], f)
					}
					seen[rel] = true
					queue = append(queue, rel)
				}
			}
		}
		if !seen["internal/spec"] || !seen["internal/flow"] {
			t.Errorf("%s: the walk missed the spec or the flow it imports (%v)", c[0], seen)
		}
	}
}

// faces are the packages people reach agentq through: the SDK, the enqueue
// command, the dashboard's API and pages, and the API's client. They go
// through the producer client (internal/client, which agentq.Client
// wraps), never to the records in Redis or the builder, whose parts they
// would otherwise rebuild. The commands' own mains (cmd/, internal/dashcli)
// compose the parts and are not faces.
var faces = []string{".", "internal/apiclient", "internal/cli", "internal/dashboard"}

func TestFacesGoThroughTheClients(t *testing.T) {
	for _, face := range faces {
		for f, paths := range imports(t, face) {
			for _, path := range paths {
				if path == module+"/internal/store" || path == module+"/internal/app" {
					t.Errorf("%s imports %s: a face goes through the clients", f, path)
				}
			}
		}
	}
}

// The enqueue command reaches workflows through the SDK's client
// (agentq.Client), as any program does: every verb a user scripts is a
// verb the command's tests prove. No file of internal/cli, its tests
// included, imports the producer client's package, and none of its
// commands imports the dashboard's API client (--server is
// agentq.NewServerClientWithConfig) or the client under agentq.Client
// (exit.go alone reads its unreachable error, for the worker and
// dashboard commands, which run without agentq.Client).
func TestTheCLIGoesThroughTheSDKClient(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("internal/cli", "*.go"))
	if len(files) < 10 {
		t.Fatalf("internal/cli: found %d Go files (the package moved?)", len(files))
	}
	for _, f := range files {
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		test := strings.HasSuffix(f, "_test.go")
		for _, im := range af.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			switch {
			case path == module+"/internal/producer":
				t.Errorf("%s imports %s: the CLI goes through agentq.Client (add what it lacks to the root package)", f, path)
			case test:
			case path == module+"/internal/apiclient":
				t.Errorf("%s imports %s: --server goes through agentq.NewServerClientWithConfig", f, path)
			case path == module+"/internal/client" && filepath.Base(f) != "exit.go":
				t.Errorf("%s imports %s: the CLI goes through agentq.Client, which wraps it", f, path)
			}
		}
	}
}

// The configuration checks its webhooks: settings (a URL, the allow
// list, the secret, the events) with the checks that need no network
// (internal/hookcheck), and links nothing of the package that sends
// (internal/webhook: its HTTP client, its SSRF guard's dialer, its
// queue), directly or through another of the module's packages; the
// checks import no HTTP or queue client themselves.
func TestTheConfigurationLinksNoWebhookSender(t *testing.T) {
	seen := map[string]bool{"internal/config": true}
	for queue := []string{"internal/config"}; len(queue) > 0; queue = queue[1:] {
		for f, paths := range imports(t, queue[0]) {
			for _, path := range paths {
				rel, mine := strings.CutPrefix(path, module+"/")
				if !mine || seen[rel] {
					continue
				}
				if rel == "internal/webhook" {
					t.Errorf("internal/config reaches %s (through %s): it checks with internal/hookcheck", path, f)
				}
				seen[rel] = true
				queue = append(queue, rel)
			}
		}
	}
	if !seen["internal/hookcheck"] {
		t.Error("internal/config does not reach internal/hookcheck (the walk is broken, or the checks moved)")
	}
	for f, paths := range imports(t, "internal/hookcheck") {
		for _, path := range paths {
			if path == "net/http" || strings.HasPrefix(path, "net/http/") || strings.HasPrefix(path, "github.com/hibiken/asynq") || strings.HasPrefix(path, "github.com/redis/") {
				t.Errorf("%s imports %s: the checks need no network client", f, path)
			}
		}
	}
}

// An example is what users copy: its code imports no internal package
// (its tests may, to check it).
func TestExampleImportsNoInternalPackage(t *testing.T) {
	err := filepath.WalkDir("examples", func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		for f, paths := range imports(t, dir) {
			for _, path := range paths {
				if strings.Contains(path, "/internal/") {
					t.Errorf("%s imports %s: examples use public packages only", f, path)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The production binaries carry only what they use: no demo (miniredis,
// chaosllm, the embedded package), no dashboard UI (asynqmon) in the worker
// or in enqueue. Walks the module's own packages from each main.
func TestBinariesLinkOnlyWhatTheyUse(t *testing.T) {
	banned := []string{"github.com/hibiken/asynqmon", "github.com/alicebob/miniredis/v2", module + "/internal/chaosllm",
		module + "/embedded", module + "/internal/dashboard", "modernc.org/sqlite"}
	for _, main := range []string{"cmd/worker", "cmd/enqueue"} {
		seen := map[string]bool{}
		queue := []string{main}
		for len(queue) > 0 {
			dir := queue[0]
			queue = queue[1:]
			for f, paths := range imports(t, dir) {
				for _, path := range paths {
					for _, b := range banned {
						if path == b || strings.HasPrefix(path, b+"/") {
							t.Errorf("%s links %s (through %s)", main, path, f)
						}
					}
					if rel, ok := strings.CutPrefix(path, module+"/"); ok && !seen[rel] {
						seen[rel] = true
						queue = append(queue, rel)
					}
				}
			}
		}
	}
}
