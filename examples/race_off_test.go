//go:build !race

package examples_test

// raceFlags: this test binary is built without -race, and so is the
// outside module's build (race_on_test.go says why they match).
var raceFlags []string
