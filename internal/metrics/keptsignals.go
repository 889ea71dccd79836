package metrics

import "context"

// newKeptSignalsGauge is the gauge of signals kept across the fleet (one
// Redis count, read at scrape time), against limits.max_kept_signals.
func newKeptSignalsGauge() *scrapeGauge {
	return newScrapeGauge("agentq_signals_kept",
		"Signals kept now (sent while no step waited on them), across every name and match; a send no step waits for is refused past limits.max_kept_signals.")
}

// WatchKeptSignals makes agentq_signals_kept read count at scrape time; a
// scrape while the count fails (Redis away) has no sample.
func (m *Metrics) WatchKeptSignals(count func(ctx context.Context) (int64, error)) {
	m.kept.set(func(ctx context.Context) (float64, error) {
		n, err := count(ctx)
		return float64(n), err
	})
}
