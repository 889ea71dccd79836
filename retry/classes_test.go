package retry_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/agentq/agentq/retry"
)

// Every Class constant is in the one table (Classes), and docs/failures.md
// lists every class of it.
func TestEveryClassIsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "class.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []retry.Class
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Class" && len(v.Values) == 1 {
				lit, _ := strconv.Unquote(v.Values[0].(*ast.BasicLit).Value)
				consts = append(consts, retry.Class(lit))
			}
		}
	}
	if len(consts) < 20 {
		t.Fatalf("found %d Class constants in class.go: the parse is broken", len(consts))
	}
	table := retry.Classes()
	for _, c := range consts {
		if !slices.Contains(table, c) {
			t.Errorf("class %s is a constant but not in the rules table", c)
		}
	}
	doc, err := os.ReadFile("../docs/failures.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range table {
		if c == retry.OK { // not a failure
			continue
		}
		if !regexp.MustCompile("(?m)^\\| [^|]*`" + string(c) + "`[^|]*\\|").Match(doc) {
			t.Errorf("docs/failures.md has no row for class %s", c)
		}
	}
}

type classed struct{ c retry.Class }

func (e classed) Error() string      { return string(e.c) }
func (e classed) Class() retry.Class { return e.c }

// ClassOf reads a class an error carries, through wrapping; a deadline is a
// timeout, a cancellation canceled, anything else a network failure.
func TestClassOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want retry.Class
	}{
		{nil, retry.OK},
		{fmt.Errorf("wrapped: %w", classed{retry.Quota}), retry.Quota},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), retry.Timeout},
		{context.Canceled, retry.Canceled},
		{errors.New("connection reset"), retry.Network},
	} {
		if got := retry.ClassOf(c.err); got != c.want {
			t.Errorf("ClassOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if !retry.Busy.Rule().Free || retry.Panic.Rule().Free || !retry.NotServed.Retryable() {
		t.Error("the worker's own classes: busy is free, a panic is not, not_served is retried")
	}
}
