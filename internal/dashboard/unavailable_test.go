package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

// A Redis that answers but cannot serve now (a Cluster node that serves
// no slot: CLUSTERDOWN, as a cluster that lost a primary answers) makes
// the API answer 503 "unavailable" with a Retry-After, not a 500.
func TestAPIAnswers503WithRetryAfterWhileTheClusterIsDown(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	node := redistest.NewServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--save", "", "--appendonly", "no")
	node.Start()
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
	t.Cleanup(func() { rdb.Close() })
	d := serveDash(t, e, dashboard.Options{Token: token, Redis: rdb})
	for _, p := range []string{"/api/v1/workflows", "/api/v1/workflows/wf_x"} {
		r := d.do(t, call{Path: p, Bearer: token})
		if r.Code != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "5" || !strings.Contains(r.Body, `"code":"unavailable"`) ||
			!strings.Contains(r.Body, "CLUSTERDOWN") {
			t.Errorf("GET %s: %d, Retry-After %q, %s", p, r.Code, r.Header.Get("Retry-After"), r.Body)
		}
	}
}
