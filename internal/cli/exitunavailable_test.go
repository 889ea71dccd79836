package cli_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/redistest"
)

// A Redis that answers but cannot serve now (here a Cluster node that
// serves no slot: CLUSTERDOWN, as a cluster that lost a primary answers)
// is "unreachable", exit 3, not a failed command.
func TestClusterDownExitsThree(t *testing.T) {
	node := redistest.NewServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no")
	node.Start()
	vars := map[string]string{"AGENTQ_REDIS_ADDR": node.Addr()}
	for _, args := range [][]string{{"status", "wf_x"}, {"list"}} {
		r := run(t, cli.Enqueue, vars, args...)
		if r.code != cli.ExitUnreachable || !strings.Contains(r.err, "CLUSTERDOWN") {
			t.Errorf("%s: exit %d, stderr %q; want exit 3 and the CLUSTERDOWN", strings.Join(args, " "), r.code, r.err)
		}
	}
}
