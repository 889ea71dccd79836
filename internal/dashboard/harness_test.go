package dashboard_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/testenv"
)

// clock is the sign-in limiter's injected clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// dash is a dashboard served over real HTTP on a loopback port.
type dash struct {
	URL   string // http://127.0.0.1:port
	Port  string
	Logs  *testenv.Buffer
	Clock *clock
}

// serveDash serves a dashboard for e. o.Addr may hold "PORT", which is
// replaced by the port it really listens on (so a test can say it listens
// on all interfaces, ":PORT", or under a name, "dash.internal:PORT").
func serveDash(t *testing.T, e *testenv.Env, o dashboard.Options) *dash {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	_, port, _ := net.SplitHostPort(hs.Listener.Addr().String())
	if o.Addr == "" {
		o.Addr = hs.Listener.Addr().String()
	}
	o.Addr = strings.ReplaceAll(o.Addr, "PORT", port)
	d := &dash{URL: "http://" + hs.Listener.Addr().String(), Port: port, Logs: &testenv.Buffer{},
		Clock: &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	o.Config, o.Now = e.Config, d.Clock.Now
	if o.Redis == nil {
		o.Redis = e.Redis
	}
	if o.AsynqOpt == nil {
		o.AsynqOpt = asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}
	}
	o.Logger = slog.New(slog.NewTextHandler(d.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := dashboard.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	hs.Config.Handler = srv
	hs.Start()
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return d
}

// call is one request: Host, when set, replaces the address's own; a
// Form or a JSON text is its body.
type call struct {
	Method, Path, Host, Bearer string
	Header                     map[string]string
	Form                       url.Values
	JSON                       string
	Cookie                     *http.Cookie
}

// reply is what came back; redirects are not followed.
type reply struct {
	Code   int
	Body   string
	Header http.Header
	Resp   *http.Response
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout: 30 * time.Second}

func (d *dash) do(t *testing.T, c call) reply {
	t.Helper()
	if c.Method == "" {
		c.Method = http.MethodGet
	}
	var body io.Reader
	switch {
	case c.Form != nil:
		body = strings.NewReader(c.Form.Encode())
	case c.JSON != "":
		body = strings.NewReader(c.JSON)
	}
	req, err := http.NewRequestWithContext(t.Context(), c.Method, d.URL+c.Path, body)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.Form != nil:
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	case c.JSON != "":
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Host != "" {
		req.Host = c.Host
	}
	if c.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.Bearer)
	}
	for k, v := range c.Header {
		req.Header.Set(k, v)
	}
	if c.Cookie != nil {
		req.AddCookie(c.Cookie)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{Code: resp.StatusCode, Body: string(b), Header: resp.Header, Resp: resp}
}

// signIn posts the token to the sign-in form and returns the session cookie.
func (d *dash) signIn(t *testing.T, tok string) *http.Cookie {
	t.Helper()
	r := d.do(t, call{Method: "POST", Path: "/login", Form: url.Values{"token": {tok}, "next": {"/workflows"}}})
	for _, c := range r.Resp.Cookies() {
		if c.Name == "agentq_session" && c.Value != "" {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, tok) {
				t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not the token", c)
			}
			return c
		}
	}
	t.Fatalf("signing in gave no session cookie: %d %s", r.Code, r.Body)
	return nil
}
