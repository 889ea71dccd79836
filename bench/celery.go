package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/agentq/agentq/internal/redistest"
)

// CeleryResult is what bench/celery/run.py prints.
type CeleryResult struct {
	Chords       int     `json:"chords"`
	Members      int     `json:"members"`
	Pool         string  `json:"pool"`
	Concurrency  int     `json:"concurrency"`
	Seconds      float64 `json:"seconds"`
	ChordsPerSec float64 `json:"chords_per_sec"`
	StepsPerSec  float64 `json:"steps_per_sec"`
}

// runCelery runs the same chords on Celery (bench/celery) against the same
// Redis and chaosllm.
func runCelery(ctx context.Context, p params, db redistest.DB, chaosURL string) (*CeleryResult, error) {
	script, err := filepath.Abs(filepath.Join("bench", "celery", "run.py"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("run bench from the module root: %w", err)
	}
	cmd := exec.CommandContext(ctx, p.python, script)
	cmd.Env = append(os.Environ(),
		"BENCH_REDIS=redis://"+db.Addr+"/"+strconv.Itoa(db.DB),
		"BENCH_CHAOS="+chaosURL,
		"BENCH_CHORDS="+strconv.Itoa(p.chords),
		"BENCH_MEMBERS="+strconv.Itoa(p.members),
		"BENCH_CONCURRENCY="+strconv.Itoa(p.concurrency),
		"BENCH_POOL="+p.celeryPool)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", p.python, script, err, lastLine(errb.Bytes()))
	}
	var r CeleryResult
	if err := json.Unmarshal(bytes.TrimSpace(lastLineOf(out.Bytes())), &r); err != nil {
		return nil, fmt.Errorf("celery run printed %q: %w", out.String(), err)
	}
	return &r, nil
}

func lastLineOf(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func lastLine(b []byte) string { return string(lastLineOf(b)) }
