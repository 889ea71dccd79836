// Package docstest reads the fenced code blocks of the Markdown docs and
// the docs-test comments that say how the docs test treats them: which
// commands it cannot run and why, what a block needs set up first, which
// file a block is, what a Go block assumes. The docs test (docs_run_test.go
// at the repository's root) runs the commands and compiles the Go blocks;
// CONTRIBUTING.md describes the comments.
package docstest

import (
	"fmt"
	"strings"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File       string      // the file's name, as given to Parse
	Line       int         // the opening fence's line (1-based)
	Lang       string      // the info string's first word: sh, go, yaml, "" …
	Body       []string    // the lines between the fences, the fence's indentation removed
	Directives []Directive // the docs-test comments right before the block, in order
}

// Where is the block's place, file:line of its opening fence.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// BodyLine is the file's line number of the block's body line i (0-based).
func (b Block) BodyLine(i int) int { return b.Line + 1 + i }

// Text is the block's body as one string, each line ended by a newline.
func (b Block) Text() string {
	if len(b.Body) == 0 {
		return ""
	}
	return strings.Join(b.Body, "\n") + "\n"
}

// Shell says whether the block holds shell commands (sh, bash, shell,
// console).
func (b Block) Shell() bool {
	switch b.Lang {
	case "sh", "bash", "shell", "console":
		return true
	}
	return false
}

// Parse returns the fenced code blocks of a Markdown file (``` fences,
// indented ones inside list items too) with their directives. A docs-test
// comment that is not right before a block (blank lines and other
// docs-test comments may come between), a directive it cannot read or a
// block left open is an error naming file:line; every such error is
// returned, joined.
func Parse(file string, data []byte) ([]Block, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	var blocks []Block
	var errs []string
	var pending []Directive // docs-test comments seen since the last block or text
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimLeft(l, " ")
		switch {
		case strings.HasPrefix(trimmed, "```"):
			indent := len(l) - len(trimmed)
			info := strings.Fields(strings.TrimLeft(trimmed, "`"))
			b := Block{File: file, Line: i + 1, Directives: pending}
			if len(info) > 0 {
				b.Lang = info[0]
			}
			pending = nil
			closed := false
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(lines[i]) == "```" {
					closed = true
					break
				}
				b.Body = append(b.Body, dedent(lines[i], indent))
			}
			if !closed {
				errs = append(errs, fmt.Sprintf("%s: the code block is not closed", b.Where()))
			}
			blocks = append(blocks, b)
		case strings.HasPrefix(strings.TrimSpace(l), "<!--"):
			start := i
			text := strings.TrimSpace(l)
			for !strings.Contains(text, "-->") && i+1 < len(lines) {
				i++
				text += "\n" + lines[i]
			}
			if !strings.Contains(text, "-->") {
				errs = append(errs, fmt.Sprintf("%s:%d: the comment is not closed", file, start+1))
				continue
			}
			body, _, _ := strings.Cut(strings.TrimPrefix(text, "<!--"), "-->")
			rest, ok := strings.CutPrefix(strings.TrimSpace(body), "docs-test:")
			if !ok {
				if strings.Contains(body, "docs-test") {
					errs = append(errs, fmt.Sprintf("%s:%d: a docs-test comment starts <!-- docs-test: ", file, start+1))
				}
				continue
			}
			d, err := parseDirective(rest)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s:%d: %v", file, start+1, err))
				continue
			}
			d.Line = start + 1
			pending = append(pending, d)
		case strings.TrimSpace(l) == "":
		default:
			for _, d := range pending {
				errs = append(errs, fmt.Sprintf("%s:%d: the docs-test comment is not right before a code block", file, d.Line))
			}
			pending = nil
		}
	}
	for _, d := range pending {
		errs = append(errs, fmt.Sprintf("%s:%d: the docs-test comment is not right before a code block", file, d.Line))
	}
	if len(errs) > 0 {
		return blocks, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return blocks, nil
}

// dedent removes up to n leading spaces.
func dedent(l string, n int) string {
	for k := 0; k < n && strings.HasPrefix(l, " "); k++ {
		l = l[1:]
	}
	return l
}
