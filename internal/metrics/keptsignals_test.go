package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// agentq_signals_kept is the count read at scrape time; a count that
// fails (Redis away) leaves the sample out rather than reporting 0.
func TestKeptSignalsGaugeReadsAtScrapeTime(t *testing.T) {
	m := New(nil, nil)
	fail := false
	m.WatchKeptSignals(func(context.Context) (int64, error) {
		if fail {
			return 0, errors.New("redis away")
		}
		return 7, nil
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.kept)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "agentq_signals_kept" || mfs[0].GetMetric()[0].GetGauge().GetValue() != 7 {
		t.Fatalf("gathered %v %v, want agentq_signals_kept 7", mfs, err)
	}
	fail = true
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 0 {
		t.Fatalf("gathered %v %v while the count fails, want no sample", mfs, err)
	}
}
