package dashboard

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentq/agentq/internal/client"
)

// healthz answers 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 while every Redis primary the dashboard writes to
// answers a PING within client.ReadyTimeout (client.PrimariesAnswer: on a
// Cluster, each of them), else 503 with one line saying what does not
// answer; which address and why go to the log, not to the caller, who
// is not signed in.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), client.ReadyTimeout)
	defer cancel()
	if err := client.PrimariesAnswer(ctx, s.o.Redis); err != nil {
		s.o.Logger.Warn("dashboard: not ready", "err", err)
		what := "Redis does not answer"
		if nr := (*client.NotReady)(nil); errors.As(err, &nr) {
			what = nr.What
		}
		http.Error(w, "not ready: "+what, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}
