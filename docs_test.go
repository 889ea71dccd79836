package agentq_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every Markdown table renders whole: a row after a blank line starts a
// new paragraph (its rows show as text), and every row has the header's
// number of cells. The docs point nowhere outside the repository.
func TestDocsTablesRenderWhole(t *testing.T) {
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md", "bench/README.md")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		fence, cells := false, 0
		for i, l := range lines {
			if strings.HasPrefix(l, "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			row := strings.HasPrefix(l, "|")
			switch {
			case row && cells == 0:
				if i > 0 && strings.TrimSpace(lines[i-1]) == "" && i > 1 && strings.HasPrefix(lines[i-2], "|") {
					t.Errorf("%s:%d: a table row after a blank line: the table above ends there", f, i+1)
				}
				cells = countCells(l)
			case row:
				if n := countCells(l); n != cells {
					t.Errorf("%s:%d: %d cells, the table's header has %d", f, i+1, n, cells)
				}
			default:
				cells = 0
			}
		}
		// spelled in two pieces so that this file does not match itself
		for _, outside := range []string{"../" + "shared", "DESIGN" + " §"} {
			if strings.Contains(string(data), outside) {
				t.Errorf("%s points outside the repository (%s)", f, outside)
			}
		}
	}
}

// countCells counts a row's cells, not counting | inside `code` or escaped.
func countCells(row string) int {
	n, code := 0, false
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '`':
			code = !code
		case row[i] == '\\':
			i++
		case row[i] == '|' && !code:
			n++
		}
	}
	return n - 1
}
