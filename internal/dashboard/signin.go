package dashboard

import (
	"net/http"
	"net/url"
	"strings"
)

const cookieName = "agentq_session"

// home is where a sign-in goes when its next page is missing or unsafe.
const home = "/workflows"

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := safeNext(r.FormValue("next"))
	if s.o.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	addr := clientAddr(r)
	if wait := s.signins.wait(addr); wait > 0 {
		s.tooManySignIns(w, r, addr, wait)
		return
	}
	if !s.tokenOK(r.FormValue("token")) {
		s.failedSignIn(r, addr, "sign-in form")
		http.Redirect(w, r, withFlash(next, "wrong token"), http.StatusSeeOther)
		return
	}
	s.signins.reset(addr)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 12 * 3600})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, home, http.StatusSeeOther)
}

// safeNext keeps the sign-in's redirect on this site: only an absolute
// path is kept ("/workflows/wf_1"), never a scheme or host ("https://x",
// "//x"), a backslash ("/\x", which browsers read as "//x"), a control
// character or space (browsers drop tabs and newlines), nor any of these
// hidden by percent-encoding; anything else goes to /workflows.
func safeNext(p string) string {
	if len(p) > 2048 {
		return home
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	for range 3 { // the text as sent and as decoded, up to twice more
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsRune(p, '\\') || hasControlOrSpace(p) {
			return home
		}
		d, err := url.PathUnescape(p)
		if err != nil {
			return home
		}
		if d == p {
			return u.String()
		}
		p = d
	}
	return home
}

func hasControlOrSpace(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// withFlash adds a flash message to a path that safeNext accepted.
func withFlash(next, msg string) string {
	u, err := url.Parse(next)
	if err != nil {
		return home
	}
	q := u.Query()
	q.Set("flash", msg)
	u.RawQuery = q.Encode()
	return u.String()
}
