package mcptool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// maxStderrLine bounds each stderr line a server's log entry carries.
const maxStderrLine = 2 << 10

// logLines logs a stdio server's stderr, one entry a line, each scrubbed
// of the configuration's secrets and cut to maxStderrLine bytes (the
// rest of a longer line counted, not logged), until r ends; then closes r.
func logLines(r io.ReadCloser, server string, o *Options) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 2*maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		more := 0
		if errors.Is(err, bufio.ErrBufferFull) { // a long line: its start, and how long it was
			text := string(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				more += len(line)
			}
			line = []byte(text)
		}
		if text := strings.TrimRight(string(line), "\r\n"); text != "" || more > 0 {
			// redacted whole, then cut, then again: a secret the cut splits
			// is gone already, and what the cut left of one at the end too
			text = o.Redact(text)
			if len(text) > maxStderrLine {
				more += len(text) - maxStderrLine
				text = o.Redact(cut(text, maxStderrLine))
			}
			if more > 0 {
				text += fmt.Sprintf("… (%d more bytes)", more)
			}
			o.Logger.Info("MCP server stderr", "mcp_server", server, "line", text)
		}
		if err != nil {
			return
		}
	}
}

// cut is s's first n bytes at most, on a rune's start.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
