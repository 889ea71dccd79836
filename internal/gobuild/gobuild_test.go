package gobuild

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The Makefile's vet and staticcheck run with the configuration the tests'
// go commands use: BUILD_ENV spells Vars, keeping the user's GOFLAGS as
// Env does.
func TestTheMakefileSharesTheConfiguration(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "BUILD_ENV") {
			line = l
		}
	}
	_, val, _ := strings.Cut(line, ":=")
	want := []string{"CGO_ENABLED=0", `GOFLAGS="$(strip $(GOFLAGS) -trimpath)"`}
	if got := strings.Fields(strings.ReplaceAll(val, "$(strip $(GOFLAGS) -trimpath)", "X")); len(got) != 2 || got[0] != want[0] || got[1] != `GOFLAGS="X"` {
		t.Fatalf("Makefile's BUILD_ENV is %q, want %q", strings.TrimSpace(val), strings.Join(want, " "))
	}
	for _, v := range Vars {
		k, flag, _ := strings.Cut(v, "=")
		if !strings.Contains(val, k+"=") || !strings.Contains(val, flag) {
			t.Errorf("Makefile's BUILD_ENV %q lacks %s", strings.TrimSpace(val), v)
		}
	}
}

func TestEnvKeepsGOFLAGS(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"", "GOFLAGS=-trimpath"},
		{"-mod=mod", "GOFLAGS=-mod=mod -trimpath"},
		{"-trimpath -mod=mod", "GOFLAGS=-trimpath -mod=mod"},
	} {
		t.Setenv("GOFLAGS", c.set)
		env := Env()
		if got := env[len(env)-1]; got != c.want {
			t.Errorf("GOFLAGS %q: %q, want %q", c.set, got, c.want)
		}
		if !slices.Contains(env, "CGO_ENABLED=0") {
			t.Errorf("GOFLAGS %q: no CGO_ENABLED=0 in %v", c.set, env)
		}
	}
}
