package dashboard

import (
	"errors"
	"net/http"

	"github.com/agentq/agentq/internal/producer"
)

// apiQueues is GET /api/v1/queues.
func (s *Server) apiQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.client.Queues(r.Context())
	if err != nil {
		apiError(w, err)
		return
	}
	if qs == nil {
		qs = []producer.QueueInfo{}
	}
	writeJSON(w, http.StatusOK, qs)
}

// apiPauseQueue is POST /api/v1/queues/{name}/pause.
func (s *Server) apiPauseQueue(w http.ResponseWriter, r *http.Request) {
	ch, err := s.client.PauseQueue(r.Context(), r.PathValue("name"))
	queueAnswer(w, ch, err)
}

// apiResumeQueue is POST /api/v1/queues/{name}/resume.
func (s *Server) apiResumeQueue(w http.ResponseWriter, r *http.Request) {
	ch, err := s.client.ResumeQueue(r.Context(), r.PathValue("name"))
	queueAnswer(w, ch, err)
}

func queueAnswer(w http.ResponseWriter, ch producer.QueueChange, err error) {
	switch {
	case errors.Is(err, producer.ErrUnknownQueue):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		apiError(w, err)
	default:
		writeJSON(w, http.StatusOK, ch)
	}
}

// apiSchedules is GET /api/v1/schedules.
func (s *Server) apiSchedules(w http.ResponseWriter, r *http.Request) {
	ss, err := s.client.Schedules(r.Context())
	if err != nil {
		apiError(w, err)
		return
	}
	if ss == nil {
		ss = []producer.ScheduleInfo{}
	}
	writeJSON(w, http.StatusOK, ss)
}
