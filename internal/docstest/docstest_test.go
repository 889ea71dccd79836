package docstest

import (
	"slices"
	"strings"
	"testing"
)

const page = "# A page\n" +
	"\n" +
	"<!-- docs-test: setup worker -->\n" +
	"<!-- docs-test: not runnable (curl): needs a dashboard -->\n" +
	"\n" +
	"```sh\n" +
	"enqueue queue list                 # each queue\n" +
	"enqueue signal s --data '{\"a\": \"#1\"}' \\\n" +
	"  --match 42\n" +
	"# a comment line\n" +
	"AGENTQ_DASHBOARD_TOKEN=$(openssl rand -hex 16) docker compose up && curl -s x | jq . > out.json 2>&1\n" +
	"go run ./cmd/chaosllm --addr 127.0.0.1:8081\n" +
	"```\n" +
	"\n" +
	"1. A list item:\n" +
	"\n" +
	"   ```console\n" +
	"   $ enqueue examples/hello.yaml --follow\n" +
	"   08:02:07.774 workflow submitted chain\n" +
	"   ```\n" +
	"\n" +
	"<!-- docs-test: go\n" +
	"var x int\n" +
	"-->\n" +
	"```go\n" +
	"x++\n" +
	"```\n"

func TestParse(t *testing.T) {
	blocks, err := Parse("p.md", []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	sh, console, goBlock := blocks[0], blocks[1], blocks[2]
	if sh.Line != 6 || sh.Lang != "sh" || len(sh.Directives) != 2 || sh.Directives[0].Kind != Setup || sh.Directives[0].Name != "worker" ||
		sh.Directives[1].Kind != NotRunnable || !slices.Equal(sh.Directives[1].Programs, []string{"curl"}) || sh.Directives[1].Reason != "needs a dashboard" {
		t.Errorf("sh block %+v", sh)
	}
	if console.Lang != "console" || console.Body[0] != "$ enqueue examples/hello.yaml --follow" {
		t.Errorf("console block %+v (the list item's indentation removed)", console)
	}
	if goBlock.Directives[0].Kind != Go || goBlock.Directives[0].Decls != "var x int" {
		t.Errorf("go block %+v", goBlock)
	}

	cmds, err := Commands(sh)
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{Line: 7, Text: "enqueue queue list", Programs: []string{"enqueue"}},
		{Line: 8, Text: `enqueue signal s --data '{"a": "#1"}' --match 42`, Programs: []string{"enqueue"}},
		{Line: 11, Text: "AGENTQ_DASHBOARD_TOKEN=$(openssl rand -hex 16) docker compose up && curl -s x | jq . > out.json 2>&1", Programs: []string{"docker", "curl", "jq", "openssl"}},
		{Line: 12, Text: "go run ./cmd/chaosllm --addr 127.0.0.1:8081", Programs: []string{"go run ./cmd/chaosllm"}},
	}
	if len(cmds) != len(want) {
		t.Fatalf("commands %+v", cmds)
	}
	for i, c := range cmds {
		if c.Line != want[i].Line || c.Text != want[i].Text || !slices.Equal(c.Programs, want[i].Programs) {
			t.Errorf("command %d: %+v, want %+v", i, c, want[i])
		}
	}
	cmds, err = Commands(console)
	if err != nil || len(cmds) != 1 || cmds[0].Line != 18 || cmds[0].Text != "enqueue examples/hello.yaml --follow" {
		t.Errorf("console commands %+v %v", cmds, err)
	}
}

// A comment the test cannot read, or that is before no block, is an
// error naming its line; so is a command it cannot take apart.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ page, want string }{
		{"<!-- docs-test: not runnable -->\n```sh\nx\n```\n", "p.md:1: docs-test: \"not runnable\": write not runnable: REASON"},
		{"<!-- docs-test: run it twice -->\n```sh\nx\n```\n", "p.md:1: docs-test: \"run it twice\" is none of"},
		{"<!-- docs-test: setup worker -->\nSome text.\n\n```sh\nx\n```\n", "p.md:1: the docs-test comment is not right before a code block"},
		{"<!-- docs-test: setup worker -->\n", "p.md:1: the docs-test comment is not right before a code block"},
		{"```sh\nx\n", "p.md:1: the code block is not closed"},
		{"<!--docs-test setup worker -->\n```sh\nx\n```\n", "p.md:1: a docs-test comment starts <!-- docs-test: "},
	} {
		_, err := Parse("p.md", []byte(tc.page))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.page, err, tc.want)
		}
	}
	for _, tc := range []struct{ cmd, want string }{
		{"echo 'open", "p.md:2: an unclosed ' quote"},
		{"(cd x && make)", "p.md:2: a subshell or group"},
		{"cat <<EOF", "p.md:2: a here-document"},
		{"echo `date`", "p.md:2: a `…` command substitution"},
	} {
		b := Block{File: "p.md", Line: 1, Lang: "sh", Body: []string{tc.cmd}}
		if _, err := Commands(b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.cmd, err, tc.want)
		}
	}
}

func TestPrograms(t *testing.T) {
	for line, want := range map[string][]string{
		"go run github.com/agentq/agentq/deploy/shardnames search=6 > shards.yaml":   {"go run github.com/agentq/agentq/deploy/shardnames"},
		"go get github.com/agentq/agentq@main":                                       {"go get"},
		"go run -race ./bench -chords 1":                                             {"go run ./bench"},
		"A=1 B=\"two words\" enqueue list; worker 2>/dev/null &":                     {"enqueue", "worker"},
		`kubectl create secret generic x --from-literal=T="$(openssl rand -hex 16)"`: {"kubectl", "openssl"},
	} {
		got, err := Programs(line)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %q %v, want %q", line, got, err, want)
		}
	}
}
