package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeGauge is a gauge read when it is scraped (a count another part
// holds, or one Redis read bounded by a second); a process that never sets
// its reader, or a read that fails, has no sample.
type scrapeGauge struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	read func(ctx context.Context) (float64, error)
}

func newScrapeGauge(name, help string) *scrapeGauge {
	return &scrapeGauge{desc: prometheus.NewDesc(name, help, nil, nil)}
}

func (g *scrapeGauge) set(read func(ctx context.Context) (float64, error)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.read = read
}

func (g *scrapeGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *scrapeGauge) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	read := g.read
	g.mu.Unlock()
	if read == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if v, err := read(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v)
	}
}
