package worker

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentq/agentq/internal/metrics"
)

func get(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestProfilesAreServedOnlyWhenAskedAndNeverTheCommandLine(t *testing.T) {
	on := httptest.NewServer(serveMux(nil, metrics.New(nil, nil), &advertiser{}, true))
	defer on.Close()
	if code, b := get(t, on, "/debug/pprof/heap"); code != http.StatusOK || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("heap: %d, %d bytes, want 200 and a gzipped profile", code, len(b))
	}
	if code, b := get(t, on, "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !bytes.Contains(b, []byte("goroutine profile: total")) {
		t.Fatalf("goroutines: %d %.80q", code, b)
	}
	if code, b := get(t, on, "/debug/pprof/"); code != http.StatusOK || !bytes.Contains(b, []byte("profile?seconds=30")) || bytes.Contains(b, []byte("cmdline")) {
		t.Fatalf("index: %d %q", code, b)
	}
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		if code, _ := get(t, on, path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
	off := httptest.NewServer(serveMux(nil, metrics.New(nil, nil), &advertiser{}, false))
	defer off.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if code, _ := get(t, off, path); code != http.StatusNotFound {
			t.Errorf("profiling off: %s: %d, want 404", path, code)
		}
	}
	if code, _ := get(t, off, "/livez"); code != http.StatusOK {
		t.Errorf("profiling off: /livez %d", code)
	}
}
