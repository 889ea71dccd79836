// Package gobuild is the one build configuration that every go command a
// test runs, and the Makefile's vet and staticcheck, share: the images'
// (CGO_ENABLED=0, -trimpath; see examples/sdk-worker/Dockerfile). The
// build cache is keyed by it, so the repository is compiled once for all
// of them instead of once per configuration (the race detector's build
// of the tests is the other); on an empty cache that is minutes.
package gobuild

import (
	"os"
	"slices"
	"strings"
)

// Vars are the configuration's variables, as the Makefile's BUILD_ENV
// spells them (a test keeps the two equal).
var Vars = []string{"CGO_ENABLED=0", "GOFLAGS=-trimpath"}

// Env is this process's environment with the configuration: a GOFLAGS
// already set keeps its flags, with -trimpath added.
func Env() []string {
	env := os.Environ()
	flags := strings.TrimSpace(os.Getenv("GOFLAGS"))
	for _, v := range Vars {
		if f, ok := strings.CutPrefix(v, "GOFLAGS="); ok && flags != "" {
			v = "GOFLAGS=" + flags
			if !slices.Contains(strings.Fields(flags), f) {
				v += " " + f
			}
		}
		env = append(env, v)
	}
	return env
}
