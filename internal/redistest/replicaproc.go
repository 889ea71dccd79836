package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReplicatedProcs is a throwaway primary and its replicas, each a
// redis-server process on a loopback port without persistence
// (StartReplicated): for code without a testing.TB (the bench).
type ReplicatedProcs struct {
	Primary  string   // host:port
	Replicas []string // host:port each
	cmds     []*exec.Cmd
	dir      string
}

// StartReplicated starts a primary and n replicas of it (--replicaof) and
// returns once every replica is in sync: a write on the primary and WAIT
// n answered by all of them.
func StartReplicated(ctx context.Context, n int) (*ReplicatedProcs, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentq-replicated-")
	if err != nil {
		return nil, err
	}
	r := &ReplicatedProcs{dir: dir}
	for i := range n + 1 {
		port, err := freePort()
		if err != nil {
			r.Stop()
			return nil, err
		}
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(nd, 0o700); err != nil {
			r.Stop()
			return nil, err
		}
		args := []string{"--save", "", "--appendonly", "no", "--dir", nd, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--logfile", ""}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if i > 0 {
			host, pport, _ := net.SplitHostPort(r.Primary)
			args = append(args, "--replicaof", host, pport)
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			r.Stop()
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		r.cmds = append(r.cmds, cmd)
		if i == 0 {
			r.Primary = addr
		} else {
			r.Replicas = append(r.Replicas, addr)
		}
	}
	if err := r.waitInSync(ctx, n); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// waitInSync waits (20s at most) until the primary has n replicas online
// and in sync.
func (r *ReplicatedProcs) waitInSync(ctx context.Context, n int) error {
	c := redis.NewClient(&redis.Options{Addr: r.Primary})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn := c.Conn()
		err := conn.Set(ctx, "redistest:sync", "1", time.Minute).Err()
		var got int64
		if err == nil {
			got, err = conn.Wait(ctx, n, 200*time.Millisecond).Result()
		}
		conn.Close()
		if err == nil && got >= int64(n) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis at %s: %d of %d replicas in sync after 20s (%v)", r.Primary, got, n, err)
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) //nolint: polling with a deadline (the primary is starting)
		}
	}
}

// Stop kills the servers and removes their files.
func (r *ReplicatedProcs) Stop() {
	for _, cmd := range r.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	_ = os.RemoveAll(r.dir)
}
