package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is a redis-server process and the channel closed once it exited.
type node struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// stop kills the process and waits for it.
func (n *node) stop() {
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// launch starts redis-server (bin, with args) on a free loopback port,
// its output appended to logPath, and waits until it answers: 30s, as a
// start has taken over 10s on two cores under a full make test. A server
// that exits before it answers (its port or its cluster bus port taken
// between freePort's check and its bind, by a parallel test's
// connection) is started again on another port, 5 times at most. An
// error ends with the server's log.
func launch(ctx context.Context, bin string, args []string, logPath string) (*node, string, error) {
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, "", err
		}
		cmd := exec.Command(bin, append(slices.Clone(args), "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--logfile", "")...)
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Start()
		logf.Close()
		if err != nil {
			return nil, "", err
		}
		nd := &node{cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(nd.exited) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		switch err := answers(ctx, addr, nd.exited, 30*time.Second); {
		case err == nil:
			return nd, addr, nil
		case errors.Is(err, errExited) && try < 5:
			continue // another port
		default:
			nd.stop()
			return nil, "", fmt.Errorf("redis at %s: %w; its log ends:\n%s", addr, err, logTail(logPath))
		}
	}
}

var errExited = errors.New("the process exited")

// answers waits until the server at addr answers a PING, its process
// exits (errExited) or limit passes.
func answers(ctx context.Context, addr string, exited <-chan struct{}, limit time.Duration) error {
	n := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer n.Close()
	deadline := time.Now().Add(limit)
	for n.Ping(ctx).Err() != nil {
		select {
		case <-exited:
			return errExited
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s", limit)
		}
		time.Sleep(10 * time.Millisecond) //nolint: polling with a deadline
	}
	return nil
}

// logTail is the last 2,000 bytes of the log at path.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
