package dashboard

import (
	"context"
	"net/http"
	"time"
)

// readyTimeout bounds /readyz's PING.
const readyTimeout = 2 * time.Second

// healthz answers 200 while the process serves.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 while Redis answers a PING within readyTimeout, else
// 503 (the reason goes to the log, not to the unauthenticated caller).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.o.Redis.Ping(ctx).Err(); err != nil {
		s.o.Logger.Warn("dashboard: not ready: redis does not answer", "err", err)
		http.Error(w, "redis unreachable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}
