package metrics

import "context"

// newStreamsGauge is the dashboard's gauge of open event streams.
func newStreamsGauge() *scrapeGauge {
	return newScrapeGauge("agentq_dashboard_event_streams",
		"Event streams (SSE followers) the dashboard serves now; it refuses more past dashboard.max_streams (503), or past dashboard.max_streams_per_client from one address (429).")
}

// WatchStreams makes agentq_dashboard_event_streams read open at scrape
// time (the dashboard calls it); a process that serves none (a worker) has
// no such sample.
func (m *Metrics) WatchStreams(open func() int) {
	m.streams.set(func(context.Context) (float64, error) { return float64(open()), nil })
}
