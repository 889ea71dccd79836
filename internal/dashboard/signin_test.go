package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
)

// The sign-in's next page is kept only when it is an absolute path on
// this site.
func TestSignInRedirectStaysOnSite(t *testing.T) {
	e, _ := pending(t)
	d := serveDash(t, e, dashboard.Options{Token: token})
	for _, tc := range []struct{ next, want string }{
		{"/workflows/wf_1", "/workflows/wf_1"},
		{"/dlq?class=server", "/dlq?class=server"},
		{"/asynq/", "/asynq/"},
		{"", "/workflows"},
		{"//evil.example", "/workflows"},
		{"///evil.example", "/workflows"},
		{"/\\evil.example", "/workflows"},
		{"\\\\evil.example", "/workflows"},
		{"/\\/evil.example", "/workflows"},
		{"https://evil.example", "/workflows"},
		{"http:evil.example", "/workflows"},
		{"HTTPS://evil.example/x", "/workflows"},
		{"javascript:alert(1)", "/workflows"},
		{"evil.example", "/workflows"},
		{"/%2F%2Fevil.example", "/workflows"},
		{"/%2fevil.example", "/workflows"},
		{"%2F%2Fevil.example", "/workflows"},
		{"/%5Cevil.example", "/workflows"},
		{"/%5cevil.example", "/workflows"},
		{"/%252F%252Fevil.example", "/workflows"},
		{"/%255Cevil.example", "/workflows"},
		{"/\t/evil.example", "/workflows"},
		{"/%09/evil.example", "/workflows"},
		{"/\n/evil.example", "/workflows"},
		{"/ /evil.example", "/workflows"},
		{"/user@evil.example", "/user@evil.example"}, // a path on this site
		{"/%zz", "/workflows"},
	} {
		r := d.do(t, call{Method: "POST", Path: "/login", Form: url.Values{"token": {token}, "next": {tc.next}}})
		if r.Code != http.StatusSeeOther || r.Header.Get("Location") != tc.want {
			t.Errorf("next %q: %d Location %q, want %q", tc.next, r.Code, r.Header.Get("Location"), tc.want)
		}
	}
	// a wrong token goes back to the (safe) page with a flash
	for _, next := range []string{"//evil.example", "/dlq?class=server"} {
		r := d.do(t, call{Method: "POST", Path: "/login", Form: url.Values{"token": {"nope"}, "next": {next}}})
		loc, _ := url.Parse(r.Header.Get("Location"))
		if r.Code != http.StatusSeeOther || loc == nil || loc.Host != "" || !strings.HasPrefix(loc.Path, "/") || strings.HasPrefix(loc.Path, "//") || loc.Query().Get("flash") != "wrong token" {
			t.Errorf("wrong token, next %q: %d Location %q", next, r.Code, r.Header.Get("Location"))
		}
	}
}

// Five failed sign-ins a minute per client address, then 429 with
// Retry-After (the right token too), on the injected clock; each failure
// is logged without the token that was tried.
func TestFailedSignInsAreLimited(t *testing.T) {
	e, _ := pending(t)
	t.Run("form", func(t *testing.T) {
		d := serveDash(t, e, dashboard.Options{Token: token})
		form := func(tok string) reply {
			return d.do(t, call{Method: "POST", Path: "/login", Form: url.Values{"token": {tok}, "next": {"/dlq"}}})
		}
		for i := range 5 {
			if r := form("guess-number-" + string(rune('a'+i))); r.Code != http.StatusSeeOther || !strings.Contains(r.Header.Get("Location"), "flash=wrong+token") {
				t.Fatalf("failure %d: %d %q", i+1, r.Code, r.Header.Get("Location"))
			}
		}
		r := form("guess-number-f")
		if r.Code != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "60" {
			t.Fatalf("6th failure: %d Retry-After %q", r.Code, r.Header.Get("Retry-After"))
		}
		if r := form(token); r.Code != http.StatusTooManyRequests || len(r.Resp.Cookies()) != 0 {
			t.Fatalf("the right token while limited: %d, cookies %v", r.Code, r.Resp.Cookies())
		}
		if r := d.do(t, call{Path: "/api/v1/workflows", Bearer: token}); r.Code != http.StatusTooManyRequests {
			t.Fatalf("a bearer token while limited: %d", r.Code)
		}
		d.Clock.Add(30 * time.Second)
		if r := form(token); r.Code != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "30" {
			t.Fatalf("30 s later: %d Retry-After %q", r.Code, r.Header.Get("Retry-After"))
		}
		d.Clock.Add(30 * time.Second)
		if r := form(token); r.Code != http.StatusSeeOther || len(r.Resp.Cookies()) != 1 || r.Header.Get("Location") != "/dlq" {
			t.Fatalf("a minute later, the right token: %d %v %q", r.Code, r.Resp.Cookies(), r.Header.Get("Location"))
		}
		logs := d.Logs.String()
		if n := strings.Count(logs, `msg="dashboard: failed sign-in"`); n != 5 {
			t.Errorf("%d failed sign-ins logged, want 5:\n%s", n, logs)
		}
		if !strings.Contains(logs, "too many failed sign-ins") || !strings.Contains(logs, "client=127.0.0.1") {
			t.Errorf("the refusals or the client address are not logged:\n%s", logs)
		}
		if strings.Contains(logs, "guess-number") || strings.Contains(logs, token) {
			t.Errorf("a token is logged:\n%s", logs)
		}
	})
	t.Run("bearer", func(t *testing.T) {
		d := serveDash(t, e, dashboard.Options{Token: token})
		for i := range 5 {
			if r := d.do(t, call{Path: "/api/v1/workflows", Bearer: "guessed-bearer"}); r.Code != http.StatusUnauthorized {
				t.Fatalf("wrong bearer %d: %d", i+1, r.Code)
			}
		}
		if r := d.do(t, call{Path: "/api/v1/workflows", Bearer: "guessed-bearer"}); r.Code != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Fatalf("6th wrong bearer: %d %q", r.Code, r.Header.Get("Retry-After"))
		}
		d.Clock.Add(61 * time.Second)
		if r := d.do(t, call{Path: "/api/v1/workflows", Bearer: token}); r.Code != 200 {
			t.Fatalf("after a minute: %d", r.Code)
		}
		if logs := d.Logs.String(); strings.Count(logs, `msg="dashboard: failed sign-in"`) != 5 || strings.Contains(logs, "guessed-bearer") {
			t.Errorf("bearer failures logged wrongly:\n%s", logs)
		}
	})
}
