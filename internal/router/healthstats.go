package router

import (
	"math"
	"time"
)

// The arithmetic of health scores: counts per time bucket merged across
// workers, and a target's success rate, latency percentiles and trend.

// targetStats is a target's window, split in an older and a recent half.
type targetStats struct {
	calls, fails [2]int64
	bins         [len(latencyBins) + 1]int64
}

func aggregate(window map[int64]map[string]map[string]int64, buckets []int64) map[string]*targetStats {
	out := map[string]*targetStats{}
	for i, b := range buckets {
		half := 0
		if i >= len(buckets)/2 {
			half = 1
		}
		for model, c := range window[b] {
			st := out[model]
			if st == nil {
				st = &targetStats{}
				out[model] = st
			}
			st.calls[half] += c["calls"]
			st.fails[half] += c["fail"]
			for j, name := range binNames {
				st.bins[j] += c[name]
			}
		}
	}
	return out
}

// score is 0.4 × success rate + 0.3 × latency + 0.3 × trend by default.
func (st *targetStats) score(c HealthConfig) float64 {
	calls, fails := st.calls[0]+st.calls[1], st.fails[0]+st.fails[1]
	if calls == 0 {
		return 1
	}
	success := 1 - float64(fails)/float64(calls)
	latency := 0.0
	if p95 := st.p95(); p95 >= 0 {
		latency = float64(c.LatencyRef) / float64(c.LatencyRef+p95)
	}
	trend := 1.0
	if st.calls[0] > 0 && st.calls[1] > 0 {
		older := float64(st.fails[0]) / float64(st.calls[0])
		recent := float64(st.fails[1]) / float64(st.calls[1])
		trend = 1 - math.Max(0, math.Min(1, recent-older))
	}
	w := c.Weights
	return w.Success*success + w.Latency*latency + w.Trend*trend
}

// p95 is the upper bound of the bin holding the 95th percentile of
// successful calls' latency, or -1 without any.
func (st *targetStats) p95() time.Duration { return st.percentile(0.95) }

// percentile is the upper bound of the bin holding the q-th quantile of
// successful calls' latency, or -1 without any.
func (st *targetStats) percentile(q float64) time.Duration {
	var total int64
	for _, n := range st.bins {
		total += n
	}
	if total == 0 {
		return -1
	}
	need := int64(math.Ceil(q * float64(total)))
	var cum int64
	for i, n := range st.bins {
		cum += n
		if cum >= need {
			if i < len(latencyBins) {
				return time.Duration(latencyBins[i]) * time.Millisecond
			}
			return 2 * time.Duration(latencyBins[len(latencyBins)-1]) * time.Millisecond
		}
	}
	return -1
}

func mergeInto(dst, src map[string]map[int64]map[string]map[string]int64) {
	for p, bs := range src {
		for b, models := range bs {
			for m, c := range models {
				for name, n := range c {
					add(dst, p, b, m, name, n)
				}
			}
		}
	}
}

func copyWindow(m map[string]map[int64]map[string]map[string]int64, buckets []int64) map[string]map[int64]map[string]map[string]int64 {
	out := map[string]map[int64]map[string]map[string]int64{}
	for p, bs := range m {
		out[p] = map[int64]map[string]map[string]int64{}
		for _, b := range buckets {
			if models, ok := bs[b]; ok {
				cp := map[string]map[string]int64{}
				for model, c := range models {
					cc := map[string]int64{}
					for k, v := range c {
						cc[k] = v
					}
					cp[model] = cc
				}
				out[p][b] = cp
			}
		}
	}
	return out
}

func pruneOld(m map[string]map[int64]map[string]map[string]int64, oldest int64) {
	for _, bs := range m {
		for b := range bs {
			if b < oldest {
				delete(bs, b)
			}
		}
	}
}

// minWeight keeps a weak target in the draw: a few percent of first picks,
// which cost nothing while its breaker is open (it is skipped without a
// call) and let it prove itself once it recovers.
const minWeight = 0.05
