// Package redistest gives tests a real Redis: a throwaway redis-server on a
// free loopback port, one per test package, started on first use and killed
// when the package's tests end. Each test gets a database of its own, flushed
// before use.
//
// AGENTQ_TEST_REDIS=host:port uses that server instead. Without a
// redis-server binary the package falls back to in-process miniredis and
// says so; under CI=true a missing real Redis fails the test instead.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// databases is how many logical databases the throwaway server has; tests
// take them in turn.
const databases = 256

var (
	once    sync.Once
	addr    string
	kind    string // "redis-server", "external", "miniredis"
	initErr error
	stop    func()

	mu     sync.Mutex
	nextDB = 1
)

// Main runs a package's tests, stops the package's server afterwards and,
// when every test passed, fails the run if goroutines were left behind
// (goleak; idle HTTP keep-alive connections aside). Use it from TestMain:
// os.Exit(redistest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	if code == 0 {
		if err := Leaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// Leaks reports goroutines still running, but for idle HTTP keep-alive
// connections of the default transport (closed by the process's end) and
// the engine's kept step goroutines waiting for a step (each ends after a
// few idle seconds).
func Leaks() error {
	return goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("github.com/agentq/agentq/internal/engine.servePooled"))
}

// Stop stops the server this package started, if any.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if stop != nil {
		stop()
		stop = nil
	}
}

// DB is one test's database on the package's server.
type DB struct {
	Addr string // host:port
	DB   int    // database number
	Kind string // "redis-server", "external" or "miniredis"
}

// Options returns go-redis options for the database.
func (d DB) Options() *redis.Options { return &redis.Options{Addr: d.Addr, DB: d.DB} }

// URL is the database as a redis:// URL.
func (d DB) URL() string { return fmt.Sprintf("redis://%s/%d", d.Addr, d.DB) }

// New returns a flushed database for the test, and a client closed at the
// end of the test.
func New(tb testing.TB) (DB, *redis.Client) {
	tb.Helper()
	d, c, err := Open()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return d, c
}

// Open is New for code without a testing.TB (Example functions): the
// caller closes the client.
func Open() (DB, *redis.Client, error) {
	once.Do(start)
	if initErr != nil {
		return DB{}, nil, initErr
	}
	mu.Lock()
	db := nextDB
	nextDB++
	if nextDB >= databases {
		nextDB = 1
	}
	mu.Unlock()
	d := DB{Addr: addr, DB: db, Kind: kind}
	c := redis.NewClient(d.Options())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.FlushDB(ctx).Err(); err != nil {
		c.Close()
		return DB{}, nil, fmt.Errorf("flush db %d at %s: %w", db, addr, err)
	}
	return d, c, nil
}

func start() {
	if a := os.Getenv("AGENTQ_TEST_REDIS"); a != "" {
		addr, kind = a, "external"
		return
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			initErr = fmt.Errorf("CI=true but no redis-server binary on PATH: install it (apt-get install redis-server)")
			return
		}
		fmt.Fprintln(os.Stderr, "redistest: no redis-server binary on PATH; falling back to in-process miniredis (install redis-server for real-Redis tests)")
		m, err := miniredis.Run()
		if err != nil {
			initErr = err
			return
		}
		addr, kind, stop = m.Addr(), "miniredis", m.Close
		return
	}
	initErr = startServer(bin)
}

func startServer(bin string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "agentq-redistest-")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(databases),
		"--dir", dir, "--logfile", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "Ready to accept connections") {
				close(ready)
				signalled = true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("%s did not become ready on port %d within 10s", bin, port)
	}
	addr, kind = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "redis-server"
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	return nil
}

// freePort is a free loopback port whose cluster bus port (the port +
// 10000, which a Cluster node also listens on) is free too: a node whose
// bus port was taken exits at once ("Failed listening on port … (cluster)").
func freePort() (int, error) {
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 <= 65535 {
			if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
				bus.Close()
				l.Close()
				return port, nil
			}
		}
		l.Close()
		if try == 100 {
			return 0, fmt.Errorf("no free loopback port with a free cluster bus port in 100 tries")
		}
	}
}
