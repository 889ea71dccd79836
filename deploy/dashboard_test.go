package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashcli"
	"github.com/agentq/agentq/internal/poll"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// serveDashboard runs the real dashboard command with a container's
// arguments (after "dashboard") and environment until the test ends, and
// returns the address it prints and its stderr.
func serveDashboard(t *testing.T, args []string, env map[string]string) (string, *lockedBuffer) {
	t.Helper()
	var out, errOut lockedBuffer
	cmd := dashcli.Command(cli.Env{Out: &out, Err: &errOut, LookupEnv: lookupIn(env)})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard %v: %v", args, err)
		}
	})
	re := regexp.MustCompile(`dashboard on http://(\S+)`)
	var addr string
	poll.Until(t, 15*time.Second, func() (bool, string) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			return true, ""
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("dashboard %v stopped: %v\n%s", args, err, errOut.String())
		default:
		}
		return false, fmt.Sprintf("dashboard %v does not serve: %q %q", args, out.String(), errOut.String())
	})
	return addr, &errOut
}

// status sends GET path to the dashboard on 127.0.0.1:port naming host in
// the Host header, with the token when it is not empty.
func status(t *testing.T, port int, host, path, token string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The chart's dashboard pod works as rendered: run with its container's
// arguments, its environment (from the Secrets it names; there is no API
// key among them) and the workers' agentq.yaml, whose keys name variables
// it does not have, it listens on all interfaces, answers the kubelet's
// probes, and answers its Service's names and the ingress host, with the
// token, but no other Host.
func TestChartDashboardServes(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.RequireAuth("pw")
	port := freePort(t)
	values := with(t, with(t, with(t, fullValues(t), "redis.url", ""), "redis.addr", mr.Addr()), "dashboard.port", port)
	files := render(t, values)
	d := dashboardContainer(t, files)
	if d == nil || len(d.Args) == 0 || d.Args[0] != "dashboard" {
		t.Fatalf("dashboard container %+v", d)
	}
	dir := t.TempDir()
	for name, data := range configMap(t, files) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := podEnv(t, *d, map[string]map[string]string{
		"dashboard-token": {"AGENTQ_DASHBOARD_TOKEN": "tok-123"}, "redis-auth": {"password": "pw"},
	})
	for k, v := range env {
		if strings.HasPrefix(v, "/etc/agentq/") {
			env[k] = filepath.Join(dir, strings.TrimPrefix(v, "/etc/agentq/"))
		}
	}
	_, stderr := serveDashboard(t, d.Args[1:], env)
	if strings.Contains(stderr.String(), "loopback") {
		t.Errorf("the dashboard listens on loopback only: %s", stderr)
	}
	for _, tc := range []struct {
		host, path, token string
		want              int
	}{
		{"10.1.2.3:" + strconv.Itoa(port), "/healthz", "", 200}, // the kubelet's probes
		{"10.1.2.3:" + strconv.Itoa(port), "/readyz", "", 200},
		{"prod-agentq-dashboard", "/api/v1/workflows", "", 401},
		{"prod-agentq-dashboard", "/api/v1/workflows", "tok-123", 200},
		{"prod-agentq-dashboard", "/api/v1/keys", "tok-123", 200},
		{"prod-agentq-dashboard.agentq:80", "/api/v1/workflows", "tok-123", 200},
		{"prod-agentq-dashboard.agentq.svc.cluster.local", "/api/v1/workflows", "tok-123", 200},
		{"agentq.internal", "/api/v1/workflows", "tok-123", 200},
		{"agentq.example.org", "/api/v1/workflows", "tok-123", 200},
		{"evil.example", "/api/v1/workflows", "tok-123", http.StatusMisdirectedRequest},
	} {
		if got := status(t, port, tc.host, tc.path, tc.token); got != tc.want {
			t.Errorf("Host %s %s (token %q): %d, want %d", tc.host, tc.path, tc.token, got, tc.want)
		}
	}
}
