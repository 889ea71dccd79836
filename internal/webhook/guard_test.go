package webhook_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentq/agentq/internal/webhook"
)

// receiver is a real HTTP server on 127.0.0.1 that counts the connections
// it accepts and answers with status(n) to the n-th request (0-based).
type receiver struct {
	*httptest.Server
	conns atomic.Int32
	mu    sync.Mutex
	reqs  []*http.Request
	body  [][]byte
	reply string // written after the status; set before the first request
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b := make([]byte, 1<<16)
		n, _ := req.Body.Read(b)
		r.mu.Lock()
		i := len(r.reqs)
		r.reqs, r.body = append(r.reqs, req), append(r.body, b[:n])
		r.mu.Unlock()
		w.WriteHeader(status(i))
		_, _ = w.Write([]byte(r.reply))
	}))
	r.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.reqs) }

// port is the receiver's port.
func (r *receiver) port() string { _, p, _ := net.SplitHostPort(r.Listener.Addr().String()); return p }

// A loopback destination is refused when it is dialed, by IP or by a name
// that resolves to it, with an error that says why; the receiver never
// sees a connection. Listing the IP lets it through.
func TestGuardRefusesLoopbackAtDial(t *testing.T) {
	rcv := newReceiver(t, func(int) int { return 200 })
	open, err := webhook.NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, err := open.Client(webhook.DefaultTimeout).Post("http://"+host+":"+rcv.port()+"/hook", "application/json", strings.NewReader("{}"))
		var re *webhook.RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "127.0.0.1") || !strings.Contains(err.Error(), "a loopback address") {
			t.Errorf("%s: %v, want a refusal that names the loopback address", host, err)
		}
	}
	if n := rcv.conns.Load(); n != 0 {
		t.Fatalf("the receiver accepted %d connections; the guard must refuse before connecting", n)
	}
	listed, _ := webhook.NewGuard([]string{"127.0.0.1"})
	resp, err := listed.Client(webhook.DefaultTimeout).Post(rcv.URL+"/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("127.0.0.1 listed: %v", err)
	}
	resp.Body.Close()
	_, err = listed.Client(webhook.DefaultTimeout).Post("http://localhost:"+rcv.port()+"/hook", "application/json", strings.NewReader("{}"))
	if err == nil || !strings.Contains(err.Error(), "not in webhooks.allow") {
		t.Errorf("localhost with only 127.0.0.1 listed: %v", err)
	}
}

func TestGuardAllowList(t *testing.T) {
	g, err := webhook.NewGuard([]string{"hooks.example.com", "*.example.org", "[::1]"})
	if err != nil {
		t.Fatal(err)
	}
	for host, ok := range map[string]bool{"hooks.example.com": true, "HOOKS.example.com.": true, "a.b.example.org": true,
		"example.org": false, "evil.com": false, "hooks.example.com.evil.com": false, "::1": true} {
		if err := g.CheckHost(host); (err == nil) != ok {
			t.Errorf("CheckHost(%s) = %v, want allowed %v", host, err, ok)
		}
	}
	for _, bad := range []string{"https://x.com", "x.com:443", "x.com/path", "", "*"} {
		if _, err := webhook.NewGuard([]string{bad}); err == nil || !strings.Contains(err.Error(), "allow[0]") {
			t.Errorf("allow entry %q: %v", bad, err)
		}
	}
}

// A redirect is an answer, not a 2xx: it is not followed.
func TestClientFollowsNoRedirect(t *testing.T) {
	target := newReceiver(t, func(int) int { return 200 })
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	g, _ := webhook.NewGuard([]string{"127.0.0.1"})
	resp, err := g.Client(webhook.DefaultTimeout).Post(redirect.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || target.requests() != 0 {
		t.Fatalf("status %d, target saw %d requests: the redirect was followed", resp.StatusCode, target.requests())
	}
}
