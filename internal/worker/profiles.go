package worker

import (
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// profiles are the runtime profiles a worker serves with
// worker.profiling, by name under /debug/pprof/ (runtime/pprof's).
var profiles = []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"}

// maxCPUProfile bounds a CPU profile's seconds: a longer one is refused.
const maxCPUProfile = 60 * time.Second

// serveProfiles serves Go's runtime profiles on mux under /debug/pprof/:
// a CPU profile (profile?seconds=N, 30 by default, at most 60) and the
// profiles above (?debug=1 for text, heap?gc=1 to collect first), for
// `go tool pprof`. Written with runtime/pprof, not net/http/pprof, whose
// import registers its handlers, the command line included, on
// http.DefaultServeMux of every program linking this package (the SDK's
// users'). No execution trace: a reader that stops reading one makes the
// runtime's tracer buffer without bound. One profile at a time (another
// request meanwhile is answered 429), each written within its time and
// a minute more.
func serveProfiles(mux *http.ServeMux) {
	var one sync.Mutex
	taking := func(w http.ResponseWriter, d time.Duration, f func()) {
		if !one.TryLock() {
			http.Error(w, "a profile is being taken; try again when it is done", http.StatusTooManyRequests)
			return
		}
		defer one.Unlock()
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + time.Minute))
		f()
	}
	mux.HandleFunc("GET /debug/pprof/profile", func(w http.ResponseWriter, r *http.Request) {
		d := 30 * time.Second
		if v := r.URL.Query().Get("seconds"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || time.Duration(n)*time.Second > maxCPUProfile {
				http.Error(w, fmt.Sprintf("seconds=%q: a whole number from 1 to %d", v, int(maxCPUProfile.Seconds())), http.StatusBadRequest)
				return
			}
			d = time.Duration(n) * time.Second
		}
		taking(w, d, func() {
			w.Header().Set("Content-Type", "application/octet-stream")
			if err := pprof.StartCPUProfile(w); err != nil {
				http.Error(w, "cannot profile: "+err.Error(), http.StatusConflict)
				return
			}
			defer pprof.StopCPUProfile()
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
			}
		})
	})
	for _, name := range profiles {
		mux.HandleFunc("GET /debug/pprof/"+name, func(w http.ResponseWriter, r *http.Request) {
			debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
			taking(w, 0, func() {
				if name == "heap" && r.URL.Query().Get("gc") == "1" {
					runtime.GC()
				}
				if debug > 0 {
					w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				} else {
					w.Header().Set("Content-Type", "application/octet-stream")
				}
				_ = pprof.Lookup(name).WriteTo(w, min(max(debug, 0), 2))
			})
		})
	}
	index := "agentq worker profiles (go tool pprof http://HOST/debug/pprof/NAME):\nprofile?seconds=30 (at most 60)\n" + strings.Join(profiles, "\n") + "\n"
	mux.HandleFunc("GET /debug/pprof/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(index))
	})
}
