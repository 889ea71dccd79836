package apiclient_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/flow"
)

// What an answer that is not the dashboard's says to the caller: a
// proxy's 502/503/504 is the dashboard away (wait, and try again); a
// change whose connection dropped after it was sent may have been made,
// so it is not "try again"; a dial that failed is.
func TestAnswersThatAreNotTheDashboards(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>"))
	}))
	defer proxy.Close()
	if _, err := apiclient.New(proxy.URL, "").Status(t.Context(), "wf_x"); !errors.Is(err, flow.ErrUnavailable) || !errors.Is(err, apiclient.ErrUnreachable) {
		t.Fatalf("a proxy's 502: %v, want ErrUnavailable", err)
	}

	dropped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close() // the request arrived; its answer never leaves
		}
	}))
	defer dropped.Close()
	_, err := apiclient.New(dropped.URL, "").Cancel(t.Context(), "wf_x")
	if errors.Is(err, flow.ErrUnavailable) || !errors.Is(err, apiclient.ErrUnreachable) || !strings.Contains(err.Error(), "may have been made") {
		t.Fatalf("a change whose answer was lost: %v, want unreachable, not unavailable", err)
	}
	if _, err := apiclient.New(dropped.URL, "").Status(t.Context(), "wf_x"); !errors.Is(err, flow.ErrUnavailable) {
		t.Fatalf("a read whose answer was lost: %v, want ErrUnavailable", err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	if _, err := apiclient.New(url, "").Cancel(t.Context(), "wf_x"); !errors.Is(err, flow.ErrUnavailable) {
		t.Fatalf("a change that never left: %v, want ErrUnavailable", err)
	}
}

// A limit of 0 or less lists without a cut, as over Redis; never a panic.
func TestListWithoutALimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"id":"wf_a"},{"id":"wf_b"}]`))
	}))
	defer srv.Close()
	for _, limit := range []int{-1, 0, 1} {
		wfs, err := apiclient.New(srv.URL, "").List(t.Context(), "", limit)
		if err != nil || (limit == 1) != (len(wfs) == 1) {
			t.Fatalf("limit %d: %d workflows, %v", limit, len(wfs), err)
		}
	}
}
