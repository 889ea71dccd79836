package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerBuildStage is a Dockerfile's build stage as a shell can run it:
// its ARG defaults (overridden by args), WORKDIR, ENV and RUN steps in
// order, RUN's --mount flags dropped (they only cache).
type dockerStep struct{ kind, text string }

func dockerBuildStage(t *testing.T, path string) (args map[string]string, steps []dockerStep) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	args = map[string]string{}
	stage := 0
	for _, line := range strings.Split(text, "\n") {
		kind, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch kind {
		case "FROM":
			stage++
		case "ARG":
			if k, v, ok := strings.Cut(rest, "="); ok {
				args[k] = v
			}
		case "WORKDIR", "ENV", "RUN", "COPY":
			if stage == 1 {
				steps = append(steps, dockerStep{kind, regexp.MustCompile(`--mount=\S+\s*`).ReplaceAllString(rest, "")})
			}
		}
	}
	return args, steps
}

// The SDK worker's Dockerfile builds a module of yours that takes agentq
// from a local clone through a replace directive, with the build context
// holding both (as its comment says): its build stage runs here, without
// Docker, in such a context (the clone is this repository), offline;
// the binary is built with -trimpath and -ldflags "-s -w".
func TestSDKWorkerDockerfileBuildsAReplacedModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the SDK worker")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.TempDir()
	if err := os.Symlink(repo, filepath.Join(ctx, "agentq")); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(ctx, "my-worker")
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// the user's go.mod: agentq's requirements (a tidy module needs them),
	// agentq itself, replaced by the clone
	mine := strings.Replace(string(gomod), "module github.com/agentq/agentq", "module example.com/my-worker", 1) +
		"\nrequire github.com/agentq/agentq v0.0.0\n\nreplace github.com/agentq/agentq => ../agentq\n"
	gosum, _ := os.ReadFile(filepath.Join(repo, "go.sum"))
	main, _ := os.ReadFile(filepath.Join(repo, "examples", "sdk-worker", "main.go"))
	for name, data := range map[string][]byte{"go.mod": []byte(mine), "go.sum": gosum, "main.go": main} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	args, steps := dockerBuildStage(t, filepath.Join(repo, "examples", "sdk-worker", "Dockerfile"))
	args["MODULE"], args["PKG"] = "my-worker", "." // --build-arg, as the comment says
	out := t.TempDir()
	dir := "/"
	env := append(os.Environ(), "GOFLAGS=", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	expand := func(s string) string {
		s = os.Expand(s, func(k string) string { return args[k] })
		s = strings.ReplaceAll(s, "/src", ctx)
		return strings.ReplaceAll(s, "/out/", out+"/")
	}
	ran := false
	for _, st := range steps {
		switch st.kind {
		case "COPY":
			if st.text != ". ." {
				t.Fatalf("build stage copies %q: this test simulates COPY . . only", st.text)
			}
		case "WORKDIR":
			dir = expand(st.text)
		case "ENV":
			k, v, _ := strings.Cut(st.text, "=")
			env = append(env, k+"="+v)
		case "RUN":
			cmd := exec.Command("sh", "-c", expand(st.text))
			cmd.Dir, cmd.Env = dir, env
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("RUN %s (in %s): %v\n%s", expand(st.text), dir, err, b)
			}
			ran = true
		}
	}
	if !ran {
		t.Fatal("the Dockerfile's build stage has no RUN")
	}
	bin := filepath.Join(out, "worker")
	info, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m %s: %v\n%s", bin, err, info)
	}
	// v0.0.0 of agentq exists nowhere but through the replace directive
	// (-trimpath leaves the directory out of the build info)
	for _, want := range []string{"path\texample.com/my-worker", "dep\tgithub.com/agentq/agentq\tv0.0.0", "-trimpath=true", "CGO_ENABLED=0"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("the built worker's build info lacks %q:\n%s", want, info)
		}
	}
	// -s: no symbol table
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".symtab") != nil {
		t.Error("the built worker has a symbol table: not linked with -s")
	}
}

// Every image build strips its binaries: -trimpath and -ldflags "-s -w".
func TestDockerfilesStripBinaries(t *testing.T) {
	for _, f := range []string{"../Dockerfile", "../examples/sdk-worker/Dockerfile"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		builds := regexp.MustCompile(`go build [^\n]*`).FindAllString(strings.ReplaceAll(string(data), "\\\n", " "), -1)
		if len(builds) == 0 {
			t.Errorf("%s: no go build", f)
		}
		for _, b := range builds {
			if !strings.Contains(b, "-trimpath") || !strings.Contains(b, `-ldflags="-s -w"`) {
				t.Errorf("%s: %q does not strip (-trimpath -ldflags=\"-s -w\")", f, b)
			}
		}
	}
}
