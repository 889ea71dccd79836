package dashboard

import (
	"errors"
	"net/http"

	"github.com/agentq/agentq/internal/producer"
)

// queuesPage lists the queues (paused or not, their steps by state, their
// live workers), with a pause or resume button each, and the schedules.
func (s *Server) queuesPage(w http.ResponseWriter, r *http.Request) {
	qs, err := s.client.Queues(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	ss, err := s.client.Schedules(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	s.page(w, r, "queues", "Queues and schedules", map[string]any{"Queues": qs, "Schedules": ss})
}

// queueForm is the queues page's pause or resume button.
func (s *Server) queueForm(w http.ResponseWriter, r *http.Request) {
	var err error
	switch name := r.PathValue("name"); r.PathValue("action") {
	case "pause":
		_, err = s.client.PauseQueue(r.Context(), name)
	case "resume":
		_, err = s.client.ResumeQueue(r.Context(), name)
	default:
		http.Error(w, "the action is pause or resume", http.StatusNotFound)
		return
	}
	switch {
	case errors.Is(err, producer.ErrUnknownQueue):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/queues", http.StatusSeeOther)
}
