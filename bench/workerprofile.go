package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// profileWorker writes the profiles of the worker serving them at addr
// (worker.profiling) into dir: its CPU over the first latency from now
// (the slots filling and their first calls), then its live heap (after a
// collection), its goroutines grouped by stack and its Go memory gauges
// (worker-memory.txt: heap in use, idle and released, stacks in use and
// the runtime's total in MiB, and the goroutines' count): every slot busy
// if they filled within that latency.
func profileWorker(ctx context.Context, addr, dir string, latency time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	secs := max(1, int(latency.Seconds()))
	for _, f := range []struct{ path, file string }{
		{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), "worker-cpu.pprof"},
		{"/debug/pprof/heap?gc=1", "worker-heap.pprof"},
		{"/debug/pprof/goroutine?debug=1", "worker-goroutines.txt"},
	} {
		if err := fetchTo(ctx, "http://"+addr+f.path, filepath.Join(dir, f.file), time.Duration(secs+30)*time.Second); err != nil {
			return err
		}
	}
	mem := goMemory(ctx, "http://"+addr)
	if len(mem) == 0 {
		return fmt.Errorf("GET http://%s/metrics: no Go memory gauges", addr)
	}
	keys := make([]string, 0, len(mem))
	for k := range mem {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if k == "go_goroutines" {
			fmt.Fprintf(&b, "%s %.0f\n", k, mem[k])
		} else {
			fmt.Fprintf(&b, "%s %.1f\n", k, mem[k])
		}
	}
	return os.WriteFile(filepath.Join(dir, "worker-memory.txt"), []byte(b.String()), 0o644)
}

// fetchTo writes url's body to file.
func fetchTo(ctx context.Context, url, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
