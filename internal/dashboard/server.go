// Package dashboard serves agentq's web dashboard: asynqmon at /asynq/,
// pages for workflows, providers and dead letters, a JSON API under
// /api/v1/, and /metrics. Pages are server-rendered from embedded
// templates; no CDN.
//
// Mutations (cancel, requeue, discard, submit, and asynqmon's write
// actions) need the token from AGENTQ_DASHBOARD_TOKEN: as a bearer token
// (API) or a session cookie set by the sign-in form (pages). The cookie
// holds an HMAC of the token, never the token. With ReadOnly every
// mutation is refused. Without a token the command binds to loopback only.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/tasks"
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
}

// Server is the dashboard's http.Handler.
type Server struct {
	o       Options
	client  *tasks.Client
	keys    *store.KeyState
	brk     *store.Breakers
	health  *llmclient.Health
	pages   map[string]*template.Template
	mux     *http.ServeMux
	session string // the cookie value that proves sign-in
	mon     *asynqmon.HTTPHandler
}

const cookieName = "agentq_session"

// New builds the dashboard.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, keys: store.NewKeyState(o.Redis, nil), brk: store.NewBreakers(o.Redis),
		client: tasks.NewClient(o.Redis, app.ClientOptions(o.Config)),
		pages:  map[string]*template.Template{}}
	hc := o.Config.Resilience.Health
	s.health = llmclient.NewHealth(healthStore{store.NewHealthStats(o.Redis)}, llmclient.HealthConfig{Window: hc.Window.D(),
		Weights: llmclient.HealthWeights{Success: hc.Weights.Success, Latency: hc.Weights.Latency, Trend: hc.Weights.Trend}}, nil, o.Logger)
	if o.Token != "" {
		m := hmac.New(sha256.New, []byte(o.Token))
		m.Write([]byte("agentq dashboard session"))
		s.session = hex.EncodeToString(m.Sum(nil))
	}
	funcs := template.FuncMap{
		"took": func(a time.Time, b *time.Time) string {
			if b == nil {
				return "–"
			}
			return b.Sub(a).Round(10 * time.Millisecond).String()
		},
		"tokens": func(wf *tasks.Workflow) string {
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
	for _, page := range []string{"workflows", "workflow", "dlq", "deadletter", "providers"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", page, err)
		}
		s.pages[page] = t
	}
	s.mon = asynqmon.New(asynqmon.Options{RootPath: "/asynq", RedisConnOpt: o.AsynqOpt, ReadOnly: o.ReadOnly})
	mets := metrics.New(asynq.NewInspectorFromRedisClient(o.Redis), nil)
	static, _ := fs.Sub(staticFS, "static")

	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	mux.Handle("GET /metrics", mets.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/workflows", http.StatusFound) })
	mux.HandleFunc("GET /workflows", s.workflowsPage)
	mux.HandleFunc("GET /workflows/{id}", s.workflowPage)
	mux.HandleFunc("POST /workflows/{id}/cancel", s.mutating(s.cancelForm))
	mux.HandleFunc("GET /providers", s.providersPage)
	mux.HandleFunc("GET /dlq", s.dlqPage)
	mux.HandleFunc("GET /dlq/{task}", s.deadLetterPage)
	mux.HandleFunc("POST /dlq/{task}/{action}", s.mutating(s.dlqForm))
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	s.api(mux)
	mux.Handle("/asynq/", s.guardAsynqmon(s.mon))
	s.mux = mux
	return s, nil
}

// Close releases asynqmon's Redis connection.
func (s *Server) Close() error { return s.mon.Close() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" makes browsers send Origin: null on form posts
	if !strings.HasPrefix(r.URL.Path, "/asynq/") {
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'self'; form-action 'self'; frame-ancestors 'none'")
	}
	s.mux.ServeHTTP(w, r)
}

// authed reports whether the request carries the token (bearer) or a
// signed-in session cookie. Without a configured token everyone on
// loopback is trusted.
func (s *Server) authed(r *http.Request) bool {
	if s.o.Token == "" {
		return true
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(b), []byte(s.o.Token)) == 1
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
	}
	return false
}

// mutating refuses a change when read-only or not signed in. Forms are
// same-origin only (the session cookie is SameSite=Strict; an Origin
// header from elsewhere is refused).
func (s *Server) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case s.o.ReadOnly:
			http.Error(w, "the dashboard is read-only", http.StatusForbidden)
		case !s.authed(r):
			http.Error(w, "sign in with the dashboard token first", http.StatusUnauthorized)
		case !sameOrigin(r):
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
		default:
			h(w, r)
		}
	}
}

func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" && r.Header.Get("Authorization") != "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
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

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.FormValue("next"))
	if s.o.Token == "" || subtle.ConstantTimeCompare([]byte(r.FormValue("token")), []byte(s.o.Token)) != 1 {
		http.Redirect(w, r, next+"?flash="+url.QueryEscape("wrong token"), http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 12 * 3600})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/workflows", http.StatusSeeOther)
}

// safeNext keeps redirects on this site.
func safeNext(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return "/workflows"
	}
	return p
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, name, title string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["Title"], data["Path"], data["Flash"] = title, r.URL.Path, r.URL.Query().Get("flash")
	authed := s.authed(r)
	data["ReadOnly"], data["Authed"], data["CanAct"] = s.o.ReadOnly, authed && s.o.Token != "", authed && !s.o.ReadOnly
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages[name].ExecuteTemplate(w, name+".html", data); err != nil {
		s.o.Logger.Error("render", "page", name, "err", err)
	}
}

var states = []string{"", tasks.StatePending, tasks.StateRunning, tasks.StateBlocked, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled}

func (s *Server) workflowsPage(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	wfs, err := s.client.List(r.Context(), state, 100)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, "workflows", "Workflows", map[string]any{"Workflows": wfs, "State": state, "States": states})
}

func (s *Server) workflowPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wf, err := s.client.Status(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	deps := map[string]string{}
	var levels [][]tasks.StepRecord
	if spec, err := s.client.Spec(r.Context(), id); err == nil {
		for _, st := range spec.Steps {
			deps[st.ID] = strings.Join(st.DependsOn, ", ")
		}
		levels = graphLevels(spec, wf)
	}
	ended := store.Terminal(wf.State)
	cost := ""
	if c, ok := tasks.Cost(wf, app.Prices(s.o.Config)); ok && len(s.o.Config.Prices) > 0 {
		cost = fmt.Sprintf("%.4f", c)
	}
	s.render(w, r, "workflow", "Workflow "+wf.ID, map[string]any{"Workflow": wf, "Deps": deps, "Ended": ended, "Cost": cost, "Levels": levels})
}

func (s *Server) cancelForm(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.client.Cancel(r.Context(), id); err != nil {
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/workflows/"+url.PathEscape(id), http.StatusSeeOther)
}

func (s *Server) dlqPage(w http.ResponseWriter, r *http.Request) {
	dls, err := s.client.DeadLetters(r.Context(), r.URL.Query().Get("class"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, "dlq", "Dead letters", map[string]any{"DeadLetters": dls})
}

func (s *Server) deadLetterPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.client.DeadLetterDetail(r.Context(), r.PathValue("task"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, r, "deadletter", "Dead letter "+d.TaskID, map[string]any{"Detail": d})
}

func (s *Server) dlqForm(w http.ResponseWriter, r *http.Request) {
	task := r.PathValue("task")
	var err error
	switch r.PathValue("action") {
	case "requeue":
		err = s.client.Requeue(r.Context(), task)
	case "discard":
		err = s.client.Discard(r.Context(), task)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	wf, _, _ := strings.Cut(task, ":")
	http.Redirect(w, r, "/workflows/"+url.PathEscape(wf)+"?flash="+url.QueryEscape(r.PathValue("action")+"d "+task), http.StatusSeeOther)
}

// TargetView is a row of the providers page.
type TargetView struct {
	Provider, Model, Breaker string
	Health                   float64
}

func (s *Server) providersPage(w http.ResponseWriter, r *http.Request) {
	cfg := s.o.Config
	names := make([]string, len(cfg.Providers))
	for i, p := range cfg.Providers {
		names[i] = p.Name
	}
	brk, err := s.brk.Load(r.Context(), names)
	if err != nil {
		s.fail(w, err)
		return
	}
	_ = s.health.Sync(r.Context(), names)
	var targets []TargetView
	seen := map[string]bool{}
	for _, rn := range cfg.RouteNames() {
		for _, t := range cfg.Routes[rn].Targets {
			if seen[t.String()] {
				continue
			}
			seen[t.String()] = true
			st := brk[t.Provider][t.Model]
			targets = append(targets, TargetView{Provider: t.Provider, Model: t.Model, Breaker: st.State.String(), Health: s.health.Score(t.Provider, t.Model)})
		}
	}
	ks, err := s.keys.Load(r.Context(), names)
	if err != nil {
		s.fail(w, err)
		return
	}
	type keyView struct{ Fingerprint, State string }
	var keys []keyView
	for _, p := range cfg.Providers {
		for i, k := range p.Keys {
			st := ks[p.Name][llmclient.KeyID(k.Reveal())]
			state := "ok"
			switch {
			case st.Disabled != "":
				state = "disabled: " + st.Disabled
			case !st.CoolUntil.IsZero():
				state = "cooling until " + st.CoolUntil.UTC().Format(time.RFC3339)
			}
			keys = append(keys, keyView{llmclient.Fingerprint(p.Name, i, k.Reveal()), state})
		}
	}
	classes := map[string]int{}
	if dls, err := s.client.DeadLetters(r.Context(), ""); err == nil {
		for _, d := range dls {
			classes[d.Class]++
		}
	}
	sort.Slice(targets, func(i, j int) bool {
		return targets[i].Provider+targets[i].Model < targets[j].Provider+targets[j].Model
	})
	s.render(w, r, "providers", "Providers", map[string]any{"Targets": targets, "Keys": keys, "Classes": classes})
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	switch {
	case errorsIsNotFound(err):
		http.Error(w, err.Error(), http.StatusNotFound)
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

type healthStore struct{ *store.HealthStats }

// Add implements llmclient.HealthStore: the dashboard only reads.
func (h healthStore) Add(context.Context, []llmclient.HealthBatch, time.Duration) error { return nil }

func errorsIsNotFound(err error) bool {
	return errors.Is(err, tasks.ErrNotFound) || errors.Is(err, tasks.ErrNoDeadLetter)
}

// graphLevels lays a workflow's steps out for the step graph: each column
// holds the steps whose longest chain of dependencies has that length, so
// every arrow points right.
func graphLevels(spec *tasks.Spec, wf *tasks.Workflow) [][]tasks.StepRecord {
	depth := map[string]int{}
	var depthOf func(id string, seen int) int
	depthOf = func(id string, seen int) int {
		if d, ok := depth[id]; ok {
			return d
		}
		d := 0
		if st, ok := spec.Step(id); ok && seen <= len(spec.Steps) {
			for _, p := range st.DependsOn {
				d = max(d, depthOf(p, seen+1)+1)
			}
		}
		depth[id] = d
		return d
	}
	var levels [][]tasks.StepRecord
	for _, s := range wf.Steps {
		d := depthOf(s.ID, 0)
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		levels[d] = append(levels[d], s)
	}
	return levels
}
