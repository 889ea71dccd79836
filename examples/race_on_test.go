//go:build race

package examples_test

// raceFlags are the go command's flags for a build that shares this test
// binary's build cache: built with -race, the outside module's build is
// too, so its dependencies (the same packages at the same versions) are
// compiled once for both instead of twice.
var raceFlags = []string{"-race"}
