package cli_test

import (
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/agentq/agentq/internal/cli"
)

// Without a configuration file, a command that uses Redis says which Redis
// it uses; a Redis it cannot reach makes one error line, not go-redis' own
// log lines first.
func TestNoConfigSaysWhichRedis(t *testing.T) {
	// go-redis' default logger writes to file descriptor 2, not to the
	// command's stderr: catch that too
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(pw.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	caught := make(chan string)
	go func() { b, _ := io.ReadAll(pr); caught <- string(b) }()
	r := run(t, cli.Enqueue, map[string]string{"AGENTQ_REDIS_ADDR": "127.0.0.1:1"}, "status", "wf_x")
	_ = syscall.Dup3(saved, 2, 0)
	syscall.Close(saved)
	pw.Close()
	if got := <-caught; got != "" {
		t.Errorf("the process's stderr got lines of its own:\n%s", got)
	}
	if !strings.Contains(r.err, "no configuration file") || !strings.Contains(r.err, "using Redis at 127.0.0.1:1") {
		t.Fatalf("stderr %q does not say which Redis", r.err)
	}
	if lines := strings.Split(strings.TrimSpace(r.err), "\n"); len(lines) != 2 {
		t.Fatalf("stderr has %d lines, want the notice and the error:\n%s", len(lines), r.err)
	}
}
