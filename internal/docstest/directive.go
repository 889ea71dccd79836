package docstest

import (
	"fmt"
	"regexp"
	"strings"
)

// Kind is what a docs-test comment says.
type Kind string

// The directives, written <!-- docs-test: KIND ... --> right before a
// code block.
const (
	// NotRunnable: "not runnable: REASON" says the test does not run the
	// block's commands (or compile its Go); "not runnable (curl, kubectl):
	// REASON" only those of its commands that use one of the programs
	// named.
	NotRunnable Kind = "not runnable"
	// Setup: "setup NAME" runs the setup the docs test names NAME before
	// the block's commands (a worker, a workflow waiting at an approval…).
	Setup Kind = "setup"
	// File: "file NAME" writes the block (YAML, JSON…) as NAME in the
	// directory every command of the same page runs in.
	File Kind = "file"
	// Append: "append NAME" appends the block to NAME there (agentq.yaml:
	// a section of the configuration).
	Append Kind = "append"
	// Go: "go" followed by Go declarations (on the same line or the next
	// ones) that the Go block uses without declaring them.
	Go Kind = "go"
)

// Directive is one docs-test comment.
type Directive struct {
	Line     int      // the comment's first line in the file
	Kind     Kind     // what it says
	Programs []string // NotRunnable: the programs it is about (none: the whole block)
	Reason   string   // NotRunnable: why
	Name     string   // Setup, File, Append: the setup's or the file's name
	Decls    string   // Go: the declarations
}

var (
	notRunnable = regexp.MustCompile(`^not runnable(?:\s*\(([^)]*)\))?\s*:\s*(\S.*)$`)
	named       = regexp.MustCompile(`^(setup|file|append)\s+([A-Za-z0-9._/-]+)$`)
)

// parseDirective reads what follows "docs-test:".
func parseDirective(s string) (Directive, error) {
	s = strings.TrimSpace(s)
	if decls, ok := strings.CutPrefix(s, "go"); ok && (decls == "" || decls[0] == ' ' || decls[0] == '\n' || decls[0] == '\t') {
		return Directive{Kind: Go, Decls: strings.TrimSpace(decls)}, nil
	}
	one := strings.Join(strings.Fields(s), " ")
	if m := notRunnable.FindStringSubmatch(one); m != nil {
		d := Directive{Kind: NotRunnable, Reason: m[2]}
		if m[1] != "" {
			for _, p := range strings.Split(m[1], ",") {
				if p = strings.TrimSpace(p); p != "" {
					d.Programs = append(d.Programs, p)
				}
			}
			if len(d.Programs) == 0 {
				return Directive{}, fmt.Errorf("docs-test: not runnable (): name the programs, or leave the parentheses out")
			}
		}
		return d, nil
	}
	if strings.HasPrefix(one, "not runnable") {
		return Directive{}, fmt.Errorf("docs-test: %q: write not runnable: REASON (or not runnable (PROGRAM, …): REASON)", one)
	}
	if m := named.FindStringSubmatch(one); m != nil {
		return Directive{Kind: Kind(m[1]), Name: m[2]}, nil
	}
	return Directive{}, fmt.Errorf("docs-test: %q is none of: not runnable: REASON; not runnable (PROGRAM, …): REASON; setup NAME; file NAME; append NAME; go DECLARATIONS", one)
}
