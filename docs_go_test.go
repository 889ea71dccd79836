package agentq_test

import (
	"testing"

	"github.com/agentq/agentq/internal/docstest"
)

// Every Go block of the docs compiles against the SDK as it is (go/types
// on the compiler's export data of the packages): a snippet is put in a
// function, or at the top level when it is declarations, with the names
// docstest.GoPrelude declares and its own "docs-test: go" declarations
// (CONTRIBUTING.md).
func TestDocsGoBlocksCompile(t *testing.T) {
	pages := docPages(t)
	export, err := docstest.ExportData(t.Context(), ".")
	if err != nil {
		t.Fatal(err)
	}
	checker := docstest.NewGoChecker(export)
	n := 0
	for _, p := range pages {
		for _, b := range p.blocks {
			if b.Lang != "go" || notRunnable(b) != "" {
				continue
			}
			n++
			for _, e := range checker.Check(b) {
				t.Error(e)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go block in the docs")
	}
}
