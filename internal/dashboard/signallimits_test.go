package dashboard_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/testenv"
)

// POST /api/v1/signals and the signal's bounds: a signal no step waits
// for past limits.max_kept_signals is 429 over_limit with Retry-After;
// data over limits.max_signal_bytes is 413 signal_too_large; a body with
// anything after its JSON, or a match holding a control character, is 400
// bad_signal; each answer's error is one line naming what. The HTTP client
// (enqueue --server) gets ErrOverLimit and ErrSignalTooLarge back.
func TestAPISignalBounds(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	e.Config.Limits.MaxKeptSignals = 1
	d := serveDash(t, e, dashboard.Options{Token: token})
	post := func(body string) reply {
		return d.do(t, call{Method: "POST", Path: "/api/v1/signals", JSON: body, Bearer: token})
	}
	var answer struct{ Error, Code string }
	check := func(what string, r reply, code int, errCode, want string) {
		t.Helper()
		if err := json.Unmarshal([]byte(r.Body), &answer); err != nil || r.Code != code || answer.Code != errCode ||
			!strings.Contains(answer.Error, want) || strings.Contains(answer.Error, "\n") {
			t.Errorf("%s: %d %s, want %d %s, one line with %q", what, r.Code, r.Body, code, errCode, want)
		}
	}

	for _, bad := range []string{`{"name": "paid"} x`, `{"name": "paid"}}`, `{"name": "paid"} {"name": "paid"}`, `{"name": "paid"}]`} {
		check(bad, post(bad), http.StatusBadRequest, "bad_signal", "the body is not a signal")
	}
	check("a control character in match", post(`{"name": "paid", "match": "a\u0007b"}`), http.StatusBadRequest, "bad_signal",
		"match holds a control character (U+0007) at byte 1")
	big := `{"name": "paid", "match": "big", "data": "` + strings.Repeat("x", 64<<10) + `"}`
	check("data over 64 KiB", post(big), http.StatusRequestEntityTooLarge, "signal_too_large", "over limits.max_signal_bytes (65536)")

	if r := post(`{"name": "paid", "match": "first", "data": 1}` + "\n"); r.Code != http.StatusOK {
		t.Fatalf("the first signal: %d %s", r.Code, r.Body)
	}
	r := post(`{"name": "paid", "match": "second"}`)
	check("past limits.max_kept_signals", r, http.StatusTooManyRequests, "over_limit", "limits.max_kept_signals (1)")
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 600 {
		t.Errorf("Retry-After %q: want the seconds until the kept signal lapses (signals.keep, 10m)", r.Header.Get("Retry-After"))
	}

	remote := apiclient.New(d.URL, token)
	if _, err := remote.Signal(t.Context(), producer.Signal{Name: "paid", Match: "second"}); !errors.Is(err, producer.ErrOverLimit) {
		t.Errorf("past the limit over HTTP: %v, want ErrOverLimit", err)
	}
	_, err := remote.Signal(t.Context(), producer.Signal{Name: "paid", Data: json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)})
	if !errors.Is(err, producer.ErrSignalTooLarge) || !errors.Is(err, producer.ErrBadSignal) {
		t.Errorf("data over the limit over HTTP: %v, want ErrSignalTooLarge", err)
	}
}
