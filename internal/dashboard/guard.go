package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
)

// openPaths answer GET and HEAD without the token and whatever the Host,
// so that probes and scrapers work. Nothing else does.
var openPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/api/v1/openapi.json": true}

// signInPath reports whether a path is part of signing in, reachable
// without the token (the Host check and, for posts, the cross-site check
// still apply): the form's target, signing out and the stylesheet.
func signInPath(p string) bool {
	if c := path.Clean(p); c != p && c+"/" != p {
		return false // "/static/../workflows" is not the stylesheet
	}
	return p == "/login" || p == "/logout" || strings.HasPrefix(p, "/static/")
}

// guard is every request's way in: the open paths, then the Host check,
// then the cross-site check for anything but GET and HEAD, then the token.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	if safe && openPaths[r.URL.Path] {
		return true
	}
	if !s.hosts.allow(r.Host, r.TLS != nil) {
		s.o.Logger.Debug("dashboard: refused a request for another Host", "host", r.Host, "client", clientAddr(r))
		http.Error(w, fmt.Sprintf("this dashboard does not answer for Host %q: start it with --allowed-hosts naming it", r.Host), http.StatusMisdirectedRequest)
		return false
	}
	if !safe {
		if why := crossSite(r); why != "" {
			http.Error(w, why, http.StatusForbidden)
			return false
		}
	}
	if s.o.Token == "" || signInPath(r.URL.Path) {
		return true
	}
	return s.checkToken(w, r)
}

// crossSite says why a state-changing request is refused, or "" when it
// comes from this dashboard's own pages or from a client that is not a
// browser. Sec-Fetch-Site: cross-site is refused, same-site unless its
// Origin is this dashboard's; an Origin naming another host is refused
// ("null" only with a bearer token).
func crossSite(r *http.Request) string {
	origin := r.Header.Get("Origin")
	own := origin != "" && sameOrigin(origin, r.Host)
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	case "same-site":
		if !own {
			return "same-site request from another origin refused"
		}
	default:
		return "cross-site request refused"
	}
	switch {
	case origin == "" || own:
		return ""
	case origin == "null" && r.Header.Get("Authorization") != "":
		return ""
	}
	return "cross-origin request refused"
}

func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, host)
}

// tokenOK compares a presented token with the configured one in constant
// time (of equal-length digests, so the token's length does not show).
func (s *Server) tokenOK(presented string) bool {
	d := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(d[:], s.tokenSum[:]) == 1
}

// authed reports whether the request carries the token (bearer) or a
// signed-in session cookie. Without a configured token everyone who got
// past the Host and cross-site checks is trusted.
func (s *Server) authed(r *http.Request) bool {
	if s.o.Token == "" {
		return true
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return s.tokenOK(b)
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
	}
	return false
}

// checkToken lets a request with the token or a session through and
// answers every other one: 429 while its address has too many failed
// sign-ins, else 401 (a wrong bearer token counts as a failed sign-in).
func (s *Server) checkToken(w http.ResponseWriter, r *http.Request) bool {
	b, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !bearer {
		if s.authed(r) {
			return true
		}
		s.unauthorized(w, r)
		return false
	}
	addr := clientAddr(r)
	if wait := s.signins.wait(addr); wait > 0 {
		s.tooManySignIns(w, r, addr, wait)
		return false
	}
	if s.tokenOK(b) {
		return true
	}
	s.failedSignIn(r, addr, "bearer token")
	s.unauthorized(w, r)
	return false
}

// unauthorized answers a request without the token: JSON for the APIs,
// the sign-in page for any other GET.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	const msg = "sign in with the dashboard token first"
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/asynq/api/"):
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentq"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		w.Header().Set("Content-Security-Policy", pageCSP)
		s.renderStatus(w, r, http.StatusUnauthorized, "signin", "Sign in", nil)
	default:
		http.Error(w, msg, http.StatusUnauthorized)
	}
}

// failedSignIn counts and logs a failed sign-in; the presented token is
// never logged.
func (s *Server) failedSignIn(r *http.Request, addr, via string) {
	n := s.signins.fail(addr)
	s.o.Logger.Warn("dashboard: failed sign-in", "client", addr, "via", via, "path", r.URL.Path,
		"failures_in_window", n, "window", signInWindow.String())
}

func (s *Server) tooManySignIns(w http.ResponseWriter, r *http.Request, addr string, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	s.o.Logger.Warn("dashboard: sign-in refused: too many failed sign-ins", "client", addr, "path", r.URL.Path, "retry_after_s", secs)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, fmt.Sprintf("too many failed sign-ins from your address: try again in %d s", secs), http.StatusTooManyRequests)
}
