package worker

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/trace?seconds=1"} {
		if code, _ := get(t, on, path); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
	for _, q := range []string{"61", "0", "1e9", "x"} {
		if code, b := get(t, on, "/debug/pprof/profile?seconds="+q); code != http.StatusBadRequest || !bytes.Contains(b, []byte("from 1 to 60")) {
			t.Errorf("profile?seconds=%s: %d %q, want 400 naming the bound", q, code, b)
		}
	}
	// one profile at a time: a CPU profile being taken refuses the next
	cpu := make(chan int, 1)
	go func() {
		code := http.StatusTooManyRequests
		for code == http.StatusTooManyRequests { // until the polls below let it in
			resp, err := http.Get(on.URL + "/debug/pprof/profile?seconds=2")
			if err != nil {
				cpu <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			code = resp.StatusCode
		}
		cpu <- code
	}()
	refused := false
	for deadline := time.Now().Add(10 * time.Second); !refused && time.Now().Before(deadline); {
		code, _ := get(t, on, "/debug/pprof/goroutine")
		refused = code == http.StatusTooManyRequests
	}
	if !refused {
		t.Error("a second profile was taken while a CPU profile ran")
	}
	if code := <-cpu; code != http.StatusOK {
		t.Errorf("CPU profile: %d", code)
	}
	// nothing registered on the default mux: a program that links the
	// worker (the SDK's users') and serves it exposes no profile
	if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest(http.MethodGet, "/debug/pprof/cmdline", nil)); pattern != "" {
		t.Errorf("http.DefaultServeMux serves %q", pattern)
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
