package worker

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// profiles are the runtime profiles a worker serves with
// worker.profiling, by name under /debug/pprof/ (runtime/pprof's).
var profiles = []string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"}

// serveProfiles serves Go's runtime profiles on mux under /debug/pprof/:
// a CPU profile (profile?seconds=N), an execution trace (trace?seconds=N)
// and the profiles above, for `go tool pprof`. Not the command line
// (net/http/pprof's cmdline): it may hold a password given as a flag.
// net/http/pprof also registers its handlers on http.DefaultServeMux,
// which no agentq process serves.
func serveProfiles(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	for _, name := range profiles {
		mux.Handle("GET /debug/pprof/"+name, pprof.Handler(name))
	}
	index := "agentq worker profiles (go tool pprof http://HOST/debug/pprof/NAME):\nprofile?seconds=30\ntrace?seconds=5\n" + strings.Join(profiles, "\n") + "\n"
	mux.HandleFunc("GET /debug/pprof/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(index))
	})
}
