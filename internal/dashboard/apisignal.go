package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	if err := decodeSignal(r.Body, &req); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "the body is over " + strconv.FormatInt(mbe.Limit, 10) + " bytes", "code": "signal_too_large"})
			return
		}
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `the body is not a signal ({"name": "…", "match": "…", "data": JSON}): ` + flow.BoundID(err.Error()), "code": "bad_signal"})
		return
	}
	res, err := s.client.Signal(r.Context(), producer.Signal{Name: req.Name, Match: req.Match, Data: req.Data, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	var ole *producer.OverLimitError
	switch {
	case errors.Is(err, producer.ErrBadIdempotencyKey):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Idempotency-Key: " + err.Error(), "code": "bad_idempotency_key"})
	case errors.Is(err, producer.ErrSignalTooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": err.Error(), "code": "signal_too_large"})
	case errors.Is(err, producer.ErrBadSignal):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_signal"})
	case errors.As(err, &ole):
		w.Header().Set("Retry-After", strconv.Itoa(int(ole.RetryAfter.Seconds())))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": err.Error(), "code": "over_limit"})
	case err != nil:
		apiError(w, err)
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// decodeSignal reads one signal from body: a JSON object of signalRequest's
// fields and nothing after it but white space.
func decodeSignal(body io.Reader, req *signalRequest) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return err
	}
	var more json.RawMessage
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return errors.New("more JSON after the signal")
	default:
		return fmt.Errorf("after the signal: %w", err)
	}
}
