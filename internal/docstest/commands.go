package docstest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Command is one command line of a shell block: what sh would run as one
// line.
type Command struct {
	Line     int      // the file's line where it starts
	Text     string   // continuation lines joined, the trailing comment and a console's "$ " removed
	Programs []string // what it runs, in order: "enqueue", "curl", "go run ./cmd/worker", "go get" …
	// Output is, in a console block, the lines shown after the command
	// (what it prints), up to the next prompt.
	Output []string
}

// Commands returns the commands of a shell block: in sh, bash and shell
// blocks every line but blank ones and comments (a line ending in \
// continues on the next); in console blocks the lines after a "$ "
// prompt, the others being output. A command the reader cannot take
// apart (a subshell, a here-document, an unclosed quote) is an error
// naming its line.
func Commands(b Block) ([]Command, error) {
	var out []Command
	var errs []string
	console := b.Lang == "console"
	for i := 0; i < len(b.Body); i++ {
		l := b.Body[i]
		if console {
			rest, ok := strings.CutPrefix(l, "$ ")
			if !ok {
				if len(out) > 0 {
					out[len(out)-1].Output = append(out[len(out)-1].Output, l)
				}
				continue // output
			}
			l = rest
		}
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		start := i
		text := t
		for strings.HasSuffix(text, "\\") && i+1 < len(b.Body) {
			i++
			next := strings.TrimSpace(b.Body[i])
			if console {
				next = strings.TrimSpace(strings.TrimPrefix(next, ">"))
			}
			text = strings.TrimSpace(strings.TrimSuffix(text, "\\")) + " " + next
		}
		cmd := Command{Line: b.BodyLine(start)}
		var err error
		cmd.Text, err = stripComment(text)
		if err == nil {
			cmd.Programs, err = Programs(cmd.Text)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s:%d: %v", b.File, cmd.Line, err))
			continue
		}
		out = append(out, cmd)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// stripComment removes a trailing # comment (a # at a word's start,
// outside quotes).
func stripComment(s string) (string, error) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i]), nil
		}
	}
	if quote != 0 {
		return "", fmt.Errorf("an unclosed %c quote", quote)
	}
	return strings.TrimSpace(s), nil
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// Programs are the programs a command line runs: the first word of each
// part (parts are split at &&, ||, |, ; and &; variable assignments and
// redirections left out), and those of every $(…) in it. A go command
// is named with its verb, and go run with its package ("go run ./bench").
func Programs(line string) ([]string, error) {
	parts, subs, err := split(line)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, words := range parts {
		for len(words) > 0 && assignment.MatchString(words[0]) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		p := words[0]
		if p == "go" && len(words) > 1 {
			p += " " + words[1]
			if words[1] == "run" {
				if k := slices.IndexFunc(words[2:], func(w string) bool { return !strings.HasPrefix(w, "-") }); k >= 0 {
					p += " " + words[2+k]
				}
			}
		}
		out = append(out, p)
	}
	for _, s := range subs {
		more, err := Programs(s)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// Parts are a command line's parts (split at &&, ||, |, ; and &), each
// its words: quotes removed, redirections and their targets left out.
func Parts(line string) ([][]string, error) {
	parts, _, err := split(line)
	return parts, err
}

// split takes a command line apart into its parts' words (quotes
// removed, redirections and their targets left out) and the text of its
// command substitutions.
func split(s string) (parts [][]string, subs []string, err error) {
	var words []string
	var w strings.Builder
	inWord, redirect := false, false
	endWord := func() {
		if inWord {
			if !redirect {
				words = append(words, w.String())
			}
			redirect = false
		}
		w.Reset()
		inWord = false
	}
	endPart := func() {
		endWord()
		redirect = false
		if len(words) > 0 {
			parts = append(parts, words)
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, nil, fmt.Errorf("an unclosed ' quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s):
					i++
					w.WriteByte(s[i])
				case s[i] == '$' && i+1 < len(s) && s[i+1] == '(':
					end, err := closing(s, i+1)
					if err != nil {
						return nil, nil, err
					}
					subs = append(subs, s[i+2:end])
					w.WriteString(s[i : end+1])
					i = end
				default:
					w.WriteByte(s[i])
				}
			}
			if i >= len(s) {
				return nil, nil, fmt.Errorf(`an unclosed " quote`)
			}
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			end, err := closing(s, i+1)
			if err != nil {
				return nil, nil, err
			}
			subs = append(subs, s[i+2:end])
			w.WriteString(s[i : end+1])
			inWord = true
			i = end
		case c == '`':
			return nil, nil, fmt.Errorf("a `…` command substitution: write $(…)")
		case c == '(' || c == ')' || c == '{' && !inWord:
			return nil, nil, fmt.Errorf("a subshell or group (%c): the docs test cannot take it apart", c)
		case c == ' ' || c == '\t':
			endWord()
		case c == ';' || c == '|' || c == '&':
			endPart()
			if i+1 < len(s) && (s[i+1] == c) {
				i++ // && ||
			}
		case c == '>' || c == '<':
			if c == '<' && i+1 < len(s) && s[i+1] == '<' {
				return nil, nil, fmt.Errorf("a here-document: the docs test cannot take it apart")
			}
			// a word of digits before it is the descriptor (2>), not an argument
			if inWord && strings.Trim(w.String(), "0123456789") == "" {
				w.Reset()
				inWord = false
			} else {
				endWord()
			}
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				i++
			}
			redirect = true
			for i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\t') {
				i++
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	endPart()
	return parts, subs, nil
}

// closing is the index of the ) that closes the ( at open.
func closing(s string, open int) (int, error) {
	depth := 0
	var quote byte
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("an unclosed $(")
}

// OutputMismatch compares what a console block shows a command print
// (shown) with what it printed (got): each line shown must be a line
// printed, in order (others may come between); a line of only "…" stands
// for any lines. In a line shown, a word with a digit or "…" in it (a
// time, an id, a count) stands for any word; the other words must be the
// same. It returns the first line shown that was not printed, or "".
func OutputMismatch(shown []string, got string) string {
	printed := strings.Split(got, "\n")
	k := 0
	for _, line := range shown {
		if t := strings.TrimSpace(line); t == "" || t == "…" {
			continue
		}
		re := linePattern(line)
		for k < len(printed) && !re.MatchString(printed[k]) {
			k++
		}
		if k == len(printed) {
			return line
		}
		k++
	}
	return ""
}

// linePattern is the regular expression a line shown stands for.
func linePattern(line string) *regexp.Regexp {
	var parts []string
	for _, w := range strings.Fields(line) {
		if strings.ContainsAny(w, "0123456789") || strings.Contains(w, "…") {
			parts = append(parts, `\S+`)
		} else {
			parts = append(parts, regexp.QuoteMeta(w))
		}
	}
	return regexp.MustCompile(`^\s*` + strings.Join(parts, `\s+`) + `\s*$`)
}
