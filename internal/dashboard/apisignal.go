package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// signalRequest is the body of POST /api/v1/signals.
type signalRequest struct {
	Name  string          `json:"name"`
	Match string          `json:"match"`
	Data  json.RawMessage `json:"data"`
}

// apiSignal is POST /api/v1/signals: it completes the signal steps
// waiting on the body's name and match, or keeps the signal for the first
// that begins waiting (200 and what it did, either way). With an
// Idempotency-Key header, the signal is sent once: a second send of the
// key, later or at the same time, is a no-op answered (200) with the
// first send's id and duplicate: true.
func (s *Server) apiSignal(w http.ResponseWriter, r *http.Request) {
	var req signalRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "the body is over " + strconv.FormatInt(mbe.Limit, 10) + " bytes"})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `the body is not a signal ({"name": "…", "match": "…", "data": JSON}): ` + flow.BoundID(err.Error()), "code": "bad_signal"})
		return
	}
	res, err := s.client.Signal(r.Context(), producer.Signal{Name: req.Name, Match: req.Match, Data: req.Data, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	switch {
	case errors.Is(err, producer.ErrBadIdempotencyKey):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Idempotency-Key: " + err.Error(), "code": "bad_idempotency_key"})
	case errors.Is(err, producer.ErrBadSignal):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_signal"})
	case err != nil:
		apiError(w, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
