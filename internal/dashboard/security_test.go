package dashboard_test

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// pending submits a workflow no worker runs, so it stays pending.
func pending(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	return e, e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: s, route: solo, prompt: \"secret prompt text\" }\n"))
}

// A Host the dashboard does not answer for gets 421, on reads and on
// changes; the listen address, its loopback aliases and the allowed hosts
// work.
func TestHostHeaderIsChecked(t *testing.T) {
	e, id := pending(t)
	const P = "PORT" // replaced by the port
	type host struct {
		host string
		want int
	}
	for _, tc := range []struct {
		name  string
		o     dashboard.Options
		hosts []host
	}{
		{"no token, loopback", dashboard.Options{}, []host{
			{"127.0.0.1:" + P, 200}, {"localhost:" + P, 200}, {"[::1]:" + P, 200}, {"LocalHost:" + P, 200},
			{"evil.example:" + P, 421}, {"evil.example", 421}, {"localhost:1", 421}, {"127.0.0.1", 421},
			{"127.0.0.1.evil.example:" + P, 421}, {"localhost.:" + P, 421}}},
		{"no token, loopback, allowed hosts", dashboard.Options{AllowedHosts: []string{"dash.example", "Proxy.example:8443", "port80.example:80"}}, []host{
			{"dash.example", 200}, {"port80.example", 200}, {"port80.example:" + P, 421}, {"dash.example:" + P, 200}, {"proxy.example:8443", 200}, {"127.0.0.1:" + P, 200},
			{"proxy.example:" + P, 421}, {"evil.example:" + P, 421}, {"sub.dash.example", 421}}},
		{"token, all interfaces, allowed hosts", dashboard.Options{Token: token, Addr: ":" + P, AllowedHosts: []string{"dash.example"}}, []host{
			{"dash.example", 200}, {"localhost:" + P, 200}, {"10.1.2.3:" + P, 200}, {"[fd00::1]:" + P, 200},
			{"evil.example:" + P, 421}, {"10.1.2.3:1", 421}}},
		{"token, all interfaces, no allowed hosts: the token guards", dashboard.Options{Token: token, Addr: "[::]:" + P}, []host{
			{"evil.example:" + P, 200}, {"anything.example", 200}}},
		{"token, listening under a name", dashboard.Options{Token: token, Addr: "dash.internal:" + P}, []host{
			{"dash.internal:" + P, 200}, {"localhost:" + P, 421}, {"127.0.0.1:" + P, 421}, {"evil.example:" + P, 421}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := serveDash(t, e, tc.o)
			for _, h := range tc.hosts {
				hh := strings.ReplaceAll(h.host, P, d.Port)
				if r := d.do(t, call{Path: "/api/v1/workflows", Host: hh, Bearer: tc.o.Token}); r.Code != h.want {
					t.Errorf("GET with Host %s: %d, want %d (%s)", hh, r.Code, h.want, r.Body)
				}
				if r := d.do(t, call{Path: "/workflows/" + id, Host: hh, Bearer: tc.o.Token}); r.Code != h.want {
					t.Errorf("GET page with Host %s: %d, want %d", hh, r.Code, h.want)
				}
				if h.want != 421 {
					continue
				}
				origin := map[string]string{"Origin": "http://" + hh, "Sec-Fetch-Site": "same-origin"}
				for _, p := range []string{"/api/v1/workflows/" + id + "/cancel", "/workflows/" + id + "/cancel", "/api/v1/dlq"} {
					if r := d.do(t, call{Method: "POST", Path: p, Host: hh, Bearer: tc.o.Token, Header: origin}); r.Code != 421 {
						t.Errorf("POST %s with Host %s: %d, want 421", p, hh, r.Code)
					}
				}
			}
			if wf, err := e.Client.Status(t.Context(), id); err != nil || wf.State != store.StatePending {
				t.Fatalf("after refused cancels the workflow is %v (%v), want pending", wf, err)
			}
		})
	}
	// listening on all interfaces without allowed hosts, a foreign Host
	// still needs the token
	d := serveDash(t, e, dashboard.Options{Token: token, Addr: ":" + P})
	if r := d.do(t, call{Path: "/api/v1/workflows/" + id, Host: "evil.example:" + d.Port}); r.Code != http.StatusUnauthorized || strings.Contains(r.Body, "secret prompt") {
		t.Errorf("foreign Host without the token: %d %s", r.Code, r.Body)
	}
	// a logged line says what was refused
	d = serveDash(t, e, dashboard.Options{})
	d.do(t, call{Path: "/workflows", Host: "rebound.example:" + d.Port})
	if !strings.Contains(d.Logs.String(), "rebound.example") {
		t.Errorf("the refusal is not logged:\n%s", d.Logs.String())
	}
}

// A page on an attacker's name rebound to 127.0.0.1 sends its own name as
// Host and Origin (same-origin to the browser): refused. The dashboard's
// own page cancels.
func TestRebindingCannotCancelButTheOwnOriginCan(t *testing.T) {
	e, id := pending(t)
	d := serveDash(t, e, dashboard.Options{}) // no token: loopback, as the command binds it
	evil := "attacker.example:" + d.Port
	for _, p := range []string{"/workflows/" + id + "/cancel", "/api/v1/workflows/" + id + "/cancel"} {
		r := d.do(t, call{Method: "POST", Path: p, Host: evil, Header: map[string]string{"Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin"}})
		if r.Code != http.StatusMisdirectedRequest {
			t.Fatalf("rebound POST %s: %d %s", p, r.Code, r.Body)
		}
	}
	if r := d.do(t, call{Path: "/api/v1/workflows/" + id, Host: evil}); r.Code != http.StatusMisdirectedRequest || strings.Contains(r.Body, "secret prompt") {
		t.Fatalf("rebound read: %d %s", r.Code, r.Body)
	}
	if wf, _ := e.Client.Status(t.Context(), id); wf.State != store.StatePending {
		t.Fatalf("state after the rebound posts: %s", wf.State)
	}
	own := strings.TrimPrefix(d.URL, "http://")
	r := d.do(t, call{Method: "POST", Path: "/workflows/" + id + "/cancel", Header: map[string]string{"Origin": d.URL, "Sec-Fetch-Site": "same-origin"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("cancel from the dashboard's own page (Host %s): %d %s", own, r.Code, r.Body)
	}
	if wf, _ := e.Client.Status(t.Context(), id); wf.State != store.StateCanceled {
		t.Fatalf("state after the own cancel: %s", wf.State)
	}
}

// State-changing requests: Sec-Fetch-Site cross-site is refused, same-site
// unless its Origin is the dashboard's, and an Origin of another host.
// Clients that are not browsers (no such headers) pass.
func TestCrossSiteChangesAreRefused(t *testing.T) {
	e, _ := pending(t)
	for _, tok := range []string{"", token} {
		d := serveDash(t, e, dashboard.Options{Token: tok})
		sibling := "http://other.localhost:" + d.Port
		for _, tc := range []struct {
			name   string
			header map[string]string
			want   int // 404: the handler ran and found no such dead letter
		}{
			{"no browser headers", nil, 404},
			{"same-origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": d.URL}, 404},
			{"same-site from the own origin", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": d.URL}, 404},
			{"none (typed by the user)", map[string]string{"Sec-Fetch-Site": "none"}, 404},
			{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
			{"cross-site with the own Origin", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": d.URL}, 403},
			{"same-site from a sibling", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": sibling}, 403},
			{"same-site without Origin", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
			{"an unknown value", map[string]string{"Sec-Fetch-Site": "cross-origin"}, 403},
			{"Origin of another host", map[string]string{"Origin": "http://evil.example"}, 403},
			{"Origin null", map[string]string{"Origin": "null"}, map[bool]int{true: 404, false: 403}[tok != ""]},
		} {
			r := d.do(t, call{Method: "POST", Path: "/api/v1/dlq/wf_x:s/requeue", Bearer: tok, Header: tc.header})
			if r.Code != tc.want {
				t.Errorf("token %v, %s: %d, want %d (%s)", tok != "", tc.name, r.Code, tc.want, r.Body)
			}
		}
		// the sign-in form too; reads are not refused for it (they need the token)
		for _, p := range []string{"/login", "/logout"} {
			if r := d.do(t, call{Method: "POST", Path: p, Form: url.Values{"token": {token}}, Header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); r.Code != 403 {
				t.Errorf("token %v: cross-site POST %s: %d", tok != "", p, r.Code)
			}
		}
		if r := d.do(t, call{Path: "/api/v1/workflows", Bearer: tok, Header: map[string]string{"Sec-Fetch-Site": "cross-site"}}); r.Code != 200 {
			t.Errorf("token %v: cross-site read with the token: %d", tok != "", r.Code)
		}
	}
}

// With a token, reads need it too: pages, the API and all of asynqmon.
func TestReadsNeedTheToken(t *testing.T) {
	e, _, id := blocked(t)
	task := tasks.TaskID(id, "s")
	d := serveDash(t, e, dashboard.Options{Token: token})
	secret := []string{"hello dashboard", "unsupported parameter", testenv.Keys[0]}
	paths := []string{"/", "/workflows", "/workflows/" + id, "/providers", "/dlq", "/dlq/" + task,
		"/api/v1/workflows", "/api/v1/workflows/" + id, "/api/v1/workflows/" + id + "/result", "/api/v1/dlq", "/api/v1/dlq/" + task,
		"/asynq/", "/asynq/queues/default", "/asynq/api/redis_info", "/asynq/api/queues", "/asynq/api/queues/default",
		"/asynq/api/queue_stats", "/asynq/api/queues/default/archived_tasks", "/asynq/api/queues/default/pending_tasks",
		"/asynq/api/queues/default/active_tasks", "/asynq/api/queues/default/scheduled_tasks", "/asynq/api/queues/default/retry_tasks",
		"/asynq/api/queues/default/completed_tasks", "/asynq/api/queues/default/tasks/" + task, "/asynq/api/queues/default/groups",
		"/asynq/api/servers", "/asynq/api/scheduler_entries", "/asynq/api/metrics",
		"/asynq//api/redis_info", "/asynq/api/../api/redis_info", "/healthz/", "/metrics/x", "/static/../workflows"}
	cookie := d.signIn(t, token)
	for _, p := range paths {
		for _, how := range []call{{}, {Header: map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}}, {Cookie: &http.Cookie{Name: "agentq_session", Value: "forged"}}} {
			how.Path = p
			r := d.do(t, how)
			if r.Code != http.StatusUnauthorized {
				t.Errorf("GET %s without the token: %d", p, r.Code)
			}
			api := strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/asynq/api/")
			if api && (r.Header.Get("Content-Type") != "application/json" || !strings.Contains(r.Body, `"error"`)) ||
				!api && !strings.Contains(r.Body, `name="token"`) {
				t.Errorf("GET %s without the token: want JSON from an API, the sign-in form elsewhere: %s\n%s", p, r.Header.Get("Content-Type"), r.Body)
			}
			for _, s := range secret {
				if strings.Contains(r.Body, s) {
					t.Errorf("GET %s without the token shows %q", p, s)
				}
			}
		}
		if strings.Contains(p, "//") || strings.Contains(p, "..") || p == "/healthz/" || p == "/metrics/x" || p == "/static/../workflows" {
			continue // not a route; shown above to need the token all the same
		}
		for _, how := range []call{{Bearer: token}, {Cookie: cookie}} {
			how.Path = p
			r := d.do(t, how)
			ok := r.Code == 200 || r.Code == http.StatusFound
			if p == "/asynq/api/metrics" { // asynqmon without Prometheus: its own error, not ours
				ok = r.Code != 401 && r.Code != 403 && r.Code != 421
			}
			if !ok {
				t.Errorf("GET %s with the token (bearer %v): %d %s", p, how.Bearer != "", r.Code, r.Body)
			}
		}
	}
	r := d.do(t, call{Path: "/dlq/" + task, Bearer: token})
	if !strings.Contains(r.Body, "hello dashboard") {
		t.Errorf("the dead letter's prompt is missing with the token:\n%s", r.Body)
	}
	for k, v := range map[string]string{"Content-Security-Policy": "frame-ancestors 'none'", "X-Frame-Options": "DENY",
		"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
		if !strings.Contains(r.Header.Get(k), v) {
			t.Errorf("page header %s: %q", k, r.Header.Get(k))
		}
	}
	// the page a browser gets asks for the token, read-only too
	ro := serveDash(t, e, dashboard.Options{Token: token, ReadOnly: true})
	if r := ro.do(t, call{Path: "/workflows/" + id}); r.Code != 401 || !strings.Contains(r.Body, `name="token"`) || strings.Contains(r.Body, "blocked") {
		t.Errorf("read-only page without the token: %d\n%s", r.Code, r.Body)
	}
	for _, p := range []string{"/api/v1/dlq/" + task + "/requeue", "/dlq/" + task + "/requeue", "/asynq/api/queues/default:pause"} {
		if r := ro.do(t, call{Method: "POST", Path: p, Bearer: token}); r.Code != http.StatusForbidden {
			t.Errorf("read-only POST %s with the token: %d", p, r.Code)
		}
	}
}

// /healthz, /readyz, /metrics and /api/v1/openapi.json answer without the
// token and whatever the Host; nothing else does.
func TestOpenPaths(t *testing.T) {
	e, _ := pending(t)
	d := serveDash(t, e, dashboard.Options{Token: token})
	for _, tc := range []struct {
		method, path     string
		foreign, ownHost int // the answer without a token, with a foreign Host and with the own
	}{
		{"GET", "/healthz", 200, 200}, {"HEAD", "/healthz", 200, 200}, {"GET", "/readyz", 200, 200}, {"GET", "/metrics", 200, 200},
		{"GET", "/api/v1/openapi.json", 200, 200},
		{"GET", "/healthz/", 421, 401}, {"GET", "/HEALTHZ", 421, 401}, {"GET", "/metrics/x", 421, 401},
		{"GET", "/healthz/../workflows", 421, 401}, {"GET", "/api/v1/openapi.json/../workflows", 421, 401},
		{"GET", "/api/v1/workflows", 421, 401}, {"POST", "/metrics", 421, 401}, {"POST", "/healthz", 421, 401},
		{"GET", "/static/style.css", 421, 200}, {"GET", "/static/../workflows", 421, 401}, {"POST", "/logout", 421, 303},
	} {
		for _, host := range []string{"", "evil.example", "scraper.internal:9090"} {
			r := d.do(t, call{Method: tc.method, Path: tc.path, Host: host})
			want := tc.foreign
			if host == "" {
				want = tc.ownHost
			}
			if r.Code != want {
				t.Errorf("%s %s with Host %q: %d, want %d", tc.method, tc.path, host, r.Code, want)
			}
		}
	}
	if r := d.do(t, call{Path: "/healthz", Host: "evil.example"}); strings.TrimSpace(r.Body) != "ok" {
		t.Errorf("/healthz: %q", r.Body)
	}
	if r := d.do(t, call{Path: "/metrics", Host: "evil.example"}); !strings.Contains(r.Body, "# HELP") {
		t.Errorf("/metrics:\n%s", r.Body)
	}
	// /readyz says 503 while Redis does not answer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: gone, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	down := serveDash(t, e, dashboard.Options{Token: token, Redis: rdb})
	if r := down.do(t, call{Path: "/readyz"}); r.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without Redis: %d %s", r.Code, r.Body)
	}
	if r := down.do(t, call{Path: "/healthz"}); r.Code != 200 {
		t.Errorf("/healthz without Redis: %d", r.Code)
	}
}
