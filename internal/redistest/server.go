package redistest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Server is a dedicated redis-server for one test, with arguments of the
// test's choosing (a password, TLS, AOF), that the test can stop and start
// again on the same port and data directory.
type Server struct {
	tb   testing.TB
	bin  string
	args []string
	Port int
	Dir  string
	cmd  *exec.Cmd
}

// NewServer prepares a redis-server with --port, --bind 127.0.0.1, --dir
// and then args; Start runs it. Without redis-server the test is skipped,
// or failed under CI=true.
func NewServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin := need(tb, "this test's own Redis", "redis-server")[0]
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{tb: tb, bin: bin, args: args, Port: port, Dir: tb.TempDir()}
	tb.Cleanup(s.Kill)
	return s
}

// SetArg replaces every argument equal to placeholder (e.g. "PORT", for
// --tls-port) with value.
func (s *Server) SetArg(placeholder, value string) {
	for i, a := range s.args {
		if a == placeholder {
			s.args[i] = value
		}
	}
}

// Log is what the server printed so far (every run).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Start runs the server (again) and returns once its port accepts
// connections.
func (s *Server) Start() {
	s.tb.Helper()
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--dir", s.Dir, "--logfile", ""}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	logf, err := os.OpenFile(filepath.Join(s.Dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer logf.Close()
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	// 30s: on two cores under a full make test a start has taken over 10s
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on %s did not listen within 30s; its log ends:\n%s", s.Addr(), logTail(filepath.Join(s.Dir, "redis.log")))
		}
		time.Sleep(10 * time.Millisecond) //nolint: polling with a deadline
	}
}

// Stop ends the server with SIGTERM, as an orchestrator does (Redis
// flushes its append-only file first), and waits for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Kill ends the server at once (SIGKILL).
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
