// Package dashboard serves agentq's web dashboard: asynqmon at /asynq/,
// pages for workflows, providers and dead letters, a JSON API under
// /api/v1/, /metrics, /healthz and /readyz. Pages are server-rendered from
// embedded templates; no CDN.
//
// With a token (AGENTQ_DASHBOARD_TOKEN) every page and API answer, reads
// included, needs it: as a bearer token (API) or a session cookie set by
// the sign-in form (pages). The cookie holds an HMAC of the token, never
// the token. Only /healthz, /readyz, /metrics and /api/v1/openapi.json
// answer without it. Every other request must name the dashboard in its
// Host header (DNS rebinding), and a state-changing one must not come
// from another site. With ReadOnly every mutation is refused. Without a
// token the command binds to loopback only.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configures a Server.
type Options struct {
	Config   config.Config
	Redis    redis.UniversalClient
	AsynqOpt asynq.RedisConnOpt // for asynqmon, which opens its own connection
	Token    string             // empty: no token (bind to loopback only)
	ReadOnly bool
	Logger   *slog.Logger
	// Addr is the address the dashboard listens on (host:port, the real
	// port when :0 was asked for). Host headers are checked against it:
	// see newHostCheck. Empty: loopback names on any port.
	Addr string
	// AllowedHosts are more names the dashboard answers for ("name" on
	// any port, or "name:port"): a reverse proxy's or an ingress's host.
	AllowedHosts []string
	// Now is the clock of the sign-in limiter (default time.Now).
	Now func() time.Time
	// KeepAlive is how often an idle event stream sends a comment, so
	// that proxies and load balancers keep it open; 0: 15s.
	KeepAlive time.Duration
	// StreamWriteTimeout bounds each write to an event stream: a client
	// that stops reading is dropped then; 0: 10s.
	StreamWriteTimeout time.Duration
}

// Server is the dashboard's http.Handler.
type Server struct {
	o        Options
	client   *client.Client
	pages    map[string]*template.Template
	mux      *http.ServeMux
	session  string // the cookie value that proves sign-in
	tokenSum [sha256.Size]byte
	hosts    hostCheck
	signins  *signInLimiter
	mon      *asynqmon.HTTPHandler
	// streams ends with StopStreams: the event streams' handlers watch it
	streams     context.Context
	stopStreams context.CancelFunc
	feed        *producer.Feed // what the event streams read (apievents.go)
	hub         *hub           // their shared readers (streamhub.go)
	caps        *streamCaps    // their bounds (streamcaps.go)
}

// pageCSP is the Content-Security-Policy of the dashboard's own pages.
const pageCSP = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self'; form-action 'self'; frame-ancestors 'none'"

// New builds the dashboard.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AsynqOpt == nil {
		return nil, errors.New("dashboard: Options.AsynqOpt is not set (asynqmon opens its own connection with it)")
	}
	hosts, err := newHostCheck(o.Addr, o.AllowedHosts, o.Token != "")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	// the producer client every face uses, reading the workers' shared
	// state too, over the given Redis (it opens nothing and starts nothing)
	client, err := client.Over(ctx, o.Config, o.Redis, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	built := false
	defer func() {
		if !built {
			client.Close()
		}
	}()
	s := &Server{o: o, client: client,
		pages: map[string]*template.Template{}, hosts: hosts, signins: newSignInLimiter(o.Now)}
	s.streams, s.stopStreams = context.WithCancel(context.WithoutCancel(ctx))
	if s.feed = client.Feed(); s.feed == nil {
		return nil, errors.New("dashboard: its client reads no event logs")
	}
	s.hub, s.caps = newHub(ctx, s.feed, o.Logger), newStreamCaps(o.Config.Dashboard)
	client.WatchStreams(s.caps.Open)
	if o.Token != "" {
		m := hmac.New(sha256.New, []byte(o.Token))
		m.Write([]byte("agentq dashboard session"))
		s.session = hex.EncodeToString(m.Sum(nil))
		s.tokenSum = sha256.Sum256([]byte(o.Token))
	}
	funcs := template.FuncMap{
		"inc": func(n int) int { return n + 1 },
		"took": func(a time.Time, b *time.Time) string {
			if b == nil {
				return "–"
			}
			return b.Sub(a).Round(10 * time.Millisecond).String()
		},
		"tokens": func(wf *producer.Workflow) string {
			p, c := 0, 0
			for _, st := range wf.Steps {
				p, c = p+st.Usage.PromptTokens, c+st.Usage.CompletionTokens
			}
			return fmt.Sprintf("%d/%d", p, c)
		},
		"health": func(h float64) string {
			switch {
			case h >= 0.7:
				return "good"
			case h >= 0.4:
				return "warn"
			}
			return "bad"
		},
	}
	for _, page := range []string{"workflows", "workflow", "dlq", "deadletter", "providers", "signin", "webhooks", "queues"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", page, err)
		}
		s.pages[page] = t
	}
	s.mon = asynqmon.New(asynqmon.Options{RootPath: "/asynq", RedisConnOpt: o.AsynqOpt, ReadOnly: o.ReadOnly})
	static, _ := fs.Sub(staticFS, "static")

	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	mux.Handle("GET /metrics", s.client.Metrics())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/workflows", http.StatusFound) })
	mux.HandleFunc("GET /workflows", s.workflowsPage)
	mux.HandleFunc("GET /workflows/{id}", s.workflowPage)
	mux.HandleFunc("POST /workflows/{id}/cancel", s.mutating(s.cancelForm))
	mux.HandleFunc("POST /workflows/{id}/steps/{step}/decision", s.mutating(s.decisionForm))
	mux.HandleFunc("POST /workflows/{id}/rerun", s.mutating(s.rerunForm))
	mux.HandleFunc("GET /providers", s.providersPage)
	mux.HandleFunc("GET /queues", s.queuesPage)
	mux.HandleFunc("POST /queues/{name}/{action}", s.mutating(s.queueForm))
	mux.HandleFunc("GET /dlq", s.dlqPage)
	mux.HandleFunc("GET /dlq/{task}", s.deadLetterPage)
	mux.HandleFunc("POST /dlq/{task}/{action}", s.mutating(s.dlqForm))
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	s.api(mux)
	s.webhooksAPI(mux)
	mux.Handle("POST /mcp", s.mcpHandler()) // agentq as an MCP server (mcp.go)
	mux.Handle("/asynq/", s.guardAsynqmon(s.mon))
	s.mux = mux
	built = true
	return s, nil
}

// Close releases asynqmon's Redis connection and what the client built.
func (s *Server) Close() error {
	s.StopStreams()
	s.hub.close()
	return errors.Join(s.mon.Close(), s.client.Close())
}

// StopStreams ends every open event stream (apievents.go), as a server
// shutting down does (http.Server.RegisterOnShutdown): they last as long
// as their workflows, and a graceful shutdown waits for its handlers.
func (s *Server) StopStreams() { s.stopStreams() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes browsers send Origin: null on form posts
	if !strings.HasPrefix(r.URL.Path, "/asynq/") {
		h.Set("Content-Security-Policy", pageCSP)
	}
	if s.guard(w, r) && checkPathID(w, r) {
		s.mux.ServeHTTP(w, r)
	}
}

// mutating refuses a change when the dashboard is read-only (the token
// and the cross-site checks are done for every request by guard).
func (s *Server) mutating(h http.HandlerFunc) http.HandlerFunc {
	return s.mutatingWithin(formBodyLimit, true, h)
}

// formBodyLimit is the most a form or an API action reads of a request
// body (a decision, a comment, a step id): a larger body is refused with
// 413 before it is read whole, multipart uploads included.
const formBodyLimit = 64 << 10

// mutatingWithin is mutating with a body limit of its own (a submitted
// spec may be larger than a form). With forms, a form body (urlencoded or
// multipart) is parsed here, within the limit, so a handler's FormValue
// never reads past it; without, the body is the handler's to read (a spec
// sent with curl -d comes as urlencoded).
func (s *Server) mutatingWithin(limit int64, forms bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.ReadOnly {
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		ct := r.Header.Get("Content-Type")
		if forms && (strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "multipart/form-data")) {
			if err := r.ParseMultipartForm(limit); err != nil && !errors.Is(err, http.ErrNotMultipart) {
				if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
					http.Error(w, fmt.Sprintf("request body over %d bytes", limit), http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		h(w, r)
	}
}

func (s *Server) guardAsynqmon(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.mutating(h.ServeHTTP)(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name, title string, data map[string]any) {
	s.renderStatus(w, r, http.StatusOK, name, title, data)
}

func (s *Server) renderStatus(w http.ResponseWriter, r *http.Request, status int, name, title string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Title"], data["Path"], data["Flash"] = title, r.URL.Path, r.URL.Query().Get("flash")
	authed := s.authed(r)
	data["ReadOnly"], data["Authed"], data["CanAct"] = s.o.ReadOnly, authed && s.o.Token != "", authed && !s.o.ReadOnly
	data["SignIn"] = !authed
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages[name].ExecuteTemplate(w, name+".html", data); err != nil {
		s.o.Logger.Error("render", "page", name, "err", err)
	}
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	switch {
	case errorsIsNotFound(err):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, producer.ErrUnknownClass), errors.Is(err, producer.ErrUnknownState):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		s.o.Logger.Error("dashboard", "err", err)
		http.Error(w, "internal error: "+err.Error(), http.StatusInternalServerError)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errorsIsNotFound(err error) bool {
	return errors.Is(err, producer.ErrNotFound) || errors.Is(err, producer.ErrNoDeadLetter)
}
