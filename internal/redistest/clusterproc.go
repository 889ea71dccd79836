package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterProcs is a throwaway Redis Cluster of primaries only, each a
// redis-server process on a loopback port (StartCluster): for tests
// (Cluster) and the bench alike.
type ClusterProcs struct {
	Addrs []string
	nodes []*node
	dir   string
}

// StartCluster starts n redis-server processes in cluster mode, assigns
// them the slots evenly (redis-cli --cluster create) and returns once
// every node sees a cluster in state ok.
func StartCluster(ctx context.Context, n int) (*ClusterProcs, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentq-cluster-")
	if err != nil {
		return nil, err
	}
	c := &ClusterProcs{dir: dir}
	for i := range n {
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(nd, 0o700); err != nil {
			c.Stop()
			return nil, err
		}
		if err := c.startNode(ctx, bin, nd); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.create(ctx, cli); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// startNode starts a cluster node in dir (launch).
func (c *ClusterProcs) startNode(ctx context.Context, bin, dir string) error {
	nd, addr, err := launch(ctx, bin, []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--save", "", "--appendonly", "no", "--dir", dir}, filepath.Join(dir, "redis.log"))
	if err != nil {
		return err
	}
	c.nodes = append(c.nodes, nd)
	c.Addrs = append(c.Addrs, addr)
	return nil
}

// create makes the nodes one cluster and waits until each sees it ok.
func (c *ClusterProcs) create(ctx context.Context, cli string) error {
	deadline := time.Now().Add(20 * time.Second)
	args := append(append([]string{"--cluster", "create"}, c.Addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	want := "cluster_known_nodes:" + strconv.Itoa(len(c.Addrs))
	for {
		ok := true
		for _, a := range c.Addrs {
			n := redis.NewClient(&redis.Options{Addr: a})
			info, err := n.ClusterInfo(ctx).Result()
			n.Close()
			ok = ok && err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the cluster was not ok on every node within 20s")
		}
		time.Sleep(50 * time.Millisecond) //nolint: polling with a deadline
	}
}

// Stop kills the nodes and removes their files.
func (c *ClusterProcs) Stop() {
	for _, nd := range c.nodes {
		nd.stop()
	}
	_ = os.RemoveAll(c.dir)
}

// PrimaryStat is one primary's counters at a moment (INFO stats and cpu).
type PrimaryStat struct {
	Commands int64   // total_commands_processed
	CPU      float64 // seconds, used_cpu_user and used_cpu_sys
}

// PrimaryStats reads every primary's counters, by address.
func PrimaryStats(ctx context.Context, c *redis.ClusterClient) (map[string]PrimaryStat, error) {
	var mu sync.Mutex
	out := map[string]PrimaryStat{}
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "stats", "cpu").Result()
		if err != nil {
			return err
		}
		var st PrimaryStat
		for _, line := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "total_commands_processed":
				st.Commands, _ = strconv.ParseInt(v, 10, 64)
			case "used_cpu_user", "used_cpu_sys":
				f, _ := strconv.ParseFloat(v, 64)
				st.CPU += f
			}
		}
		mu.Lock()
		out[m.Options().Addr] = st
		mu.Unlock()
		return nil
	})
	return out, err
}
