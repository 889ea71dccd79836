package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// result is what one side of a drill saw.
type result struct {
	Name         string
	outcomes     []outcome
	calls        []call
	breakers     map[string][]interval // agentq only
	cooldown     time.Duration
	fallbacks    int
	failedCalls  int // at the providers: chat calls that got no answer
	failedTokens int // prompt tokens those calls brought
}

// SideReport is one side's figures in the drill report.
type SideReport struct {
	Name                                                 string
	Submitted, Completed, Degraded, DeadLettered, Failed int
	Canceled, Unfinished, Lost                           int
	CompletedPct, CompletedOrDegradedPct                 float64
	LatencyP50s, LatencyP99s                             float64 // submit → end, finished workflows
	Calls                                                map[string]map[string]int
	CallsTotal, WastedCalls                              int // every call; calls that got no answer
	// CallsWhileOpen: calls started while the target's breaker was open
	// or half-open (probes), against AllowedProbes = one per cooldown.
	CallsWhileOpen []OpenTarget `json:",omitempty"`
	Reaction       []Reaction   `json:",omitempty"`
	FallbackRate   []Bucket     `json:",omitempty"`
	// At the providers: chat calls that got no answer, and the prompt
	// tokens they carried (billed by a real provider once it read them).
	FailedCallsAtProviders, TokensOnFailedCalls int
	DeadLetterReasons                           map[string]int `json:",omitempty"`
}

// OpenTarget is one target's breaker-open time and the calls it got then.
type OpenTarget struct {
	Target               string
	OpenSeconds          float64
	Calls, AllowedProbes int
	FirstOpenedAtSecond  float64
	Stretches            int
	OverLimit            bool
}

// Reaction is how fast traffic left a provider that went down and came
// back once it recovered. -1: never.
type Reaction struct {
	Provider                        string
	DownFromSecond, DownToSecond    float64
	LeftAfterSeconds                float64
	CallsWhileDown, FailedWhileDown int
	ReturnedAfterSeconds            float64
}

// Bucket is the share of answers served by a target other than the
// route's first, over ten seconds.
type Bucket struct {
	FromSecond    int
	Answers       int
	FallbackShare float64
	FailedCalls   int
	NoAnswerShare float64
}

const bucket = 10 * time.Second

func summarize(sc *Scenario, r *result, t0 time.Time, primary string) SideReport {
	s := SideReport{Name: r.Name, Calls: map[string]map[string]int{}, DeadLetterReasons: map[string]int{}}
	var lat []float64
	for _, o := range r.outcomes {
		s.Submitted++
		switch o.State {
		case "completed":
			s.Completed++
		case "degraded":
			s.Degraded++
		case "dead_lettered":
			s.DeadLettered++
		case "failed":
			s.Failed++
		case "canceled":
			s.Canceled++
		case "lost":
			s.Lost++
		default:
			s.Unfinished++
		}
		if o.State == "dead_lettered" || o.State == "failed" {
			reason := o.Reason
			if i := strings.IndexByte(reason, ':'); i > 0 {
				reason = reason[:i]
			}
			s.DeadLetterReasons[reason]++
		}
		if !o.Finished.IsZero() && (o.State == "completed" || o.State == "degraded") {
			lat = append(lat, o.Finished.Sub(o.Submitted).Seconds())
		}
	}
	if s.Submitted > 0 {
		s.CompletedPct = 100 * float64(s.Completed) / float64(s.Submitted)
		s.CompletedOrDegradedPct = 100 * float64(s.Completed+s.Degraded) / float64(s.Submitted)
	}
	s.LatencyP50s, s.LatencyP99s = percentile(lat, 50), percentile(lat, 99)

	buckets := map[int]*Bucket{}
	for _, c := range r.calls {
		if s.Calls[c.Target] == nil {
			s.Calls[c.Target] = map[string]int{}
		}
		s.Calls[c.Target][c.Class]++
		s.CallsTotal++
		i := int(c.Start.Sub(t0) / bucket)
		b := buckets[i]
		if b == nil {
			b = &Bucket{FromSecond: i * int(bucket/time.Second)}
			buckets[i] = b
		}
		if c.Class == "ok" {
			b.Answers++
			if c.Target != primary {
				b.FallbackShare++
			}
		} else {
			s.WastedCalls++
			b.FailedCalls++
		}
	}
	for _, b := range buckets {
		if b.Answers > 0 {
			b.FallbackShare /= float64(b.Answers)
		}
		if n := b.Answers + b.FailedCalls; n > 0 {
			b.NoAnswerShare = float64(b.FailedCalls) / float64(n)
		}
		s.FallbackRate = append(s.FallbackRate, *b)
	}
	sort.Slice(s.FallbackRate, func(i, j int) bool { return s.FallbackRate[i].FromSecond < s.FallbackRate[j].FromSecond })

	for target, ivs := range r.breakers {
		ot := OpenTarget{Target: target, Stretches: len(ivs), FirstOpenedAtSecond: ivs[0].From.Sub(t0).Seconds()}
		for _, iv := range ivs {
			d := iv.To.Sub(iv.From)
			ot.OpenSeconds += d.Seconds()
			// the earliest a breaker may probe is cooldown less its 20% jitter
			ot.AllowedProbes += 1 + int(d/time.Duration(float64(r.cooldown)*0.8))
			for _, c := range r.calls {
				if c.Target == target && !c.Start.Before(iv.From) && c.Start.Before(iv.To) {
					ot.Calls++
				}
			}
		}
		ot.OverLimit = ot.Calls > ot.AllowedProbes
		s.CallsWhileOpen = append(s.CallsWhileOpen, ot)
	}
	sort.Slice(s.CallsWhileOpen, func(i, j int) bool { return s.CallsWhileOpen[i].Target < s.CallsWhileOpen[j].Target })

	for _, p := range sc.Providers {
		if p.Down == nil {
			continue
		}
		from, to := t0.Add(p.Down.From.D()), t0.Add(p.Down.To.D())
		rc := Reaction{Provider: p.Name, DownFromSecond: p.Down.From.D().Seconds(), DownToSecond: p.Down.To.D().Seconds(),
			LeftAfterSeconds: -1, ReturnedAfterSeconds: -1}
		for target, ivs := range r.breakers {
			if !strings.HasPrefix(target, p.Name+"/") {
				continue
			}
			for _, iv := range ivs {
				if !iv.From.Before(from) && iv.From.Before(to) {
					if d := iv.From.Sub(from).Seconds(); rc.LeftAfterSeconds < 0 || d < rc.LeftAfterSeconds {
						rc.LeftAfterSeconds = d
					}
					break
				}
			}
		}
		for _, c := range r.calls {
			if !strings.HasPrefix(c.Target, p.Name+"/") {
				continue
			}
			if !c.Start.Before(from) && c.Start.Before(to) {
				rc.CallsWhileDown++
				if c.Class != "ok" {
					rc.FailedWhileDown++
				}
			}
			if c.Class == "ok" && !c.Start.Before(to) {
				if d := c.Start.Sub(to).Seconds(); rc.ReturnedAfterSeconds < 0 || d < rc.ReturnedAfterSeconds {
					rc.ReturnedAfterSeconds = d
				}
			}
		}
		s.Reaction = append(s.Reaction, rc)
	}
	s.FailedCallsAtProviders, s.TokensOnFailedCalls = r.failedCalls, r.failedTokens
	return s
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[int(math.Round(float64(len(s)-1)*p/100))]
}

// Report is one drill's report (the JSON file).
type Report struct {
	Scenario, About string
	Started         time.Time
	Machine         string
	DurationSeconds float64
	RatePerSecond   float64
	Workers         int
	Concurrency     int
	Redis           string
	Sides           []SideReport
	Targets         []Target
}

// Target is one issue-07 target and whether this run met it.
type Target struct {
	What, Measured string
	Met            bool
}

func secs(x float64) string {
	if x < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", x)
}

func writeMarkdown(w io.Writer, r *Report) {
	fmt.Fprintf(w, "# Drill: %s\n\n%s\n\n", r.Scenario, strings.TrimSpace(r.About))
	fmt.Fprintf(w, "Started %s on %s; workflows submitted at %.1f/s for %.0f s; %d agentq workers × concurrency %d (the naive baseline: as many goroutines); Redis: %s.\n\n",
		r.Started.Format(time.RFC3339), r.Machine, r.RatePerSecond, r.DurationSeconds, r.Workers, r.Concurrency, r.Redis)
	if len(r.Targets) > 0 {
		fmt.Fprintf(w, "## Targets\n\n| target | measured | met |\n| --- | --- | --- |\n")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", t.What, t.Measured, met)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "## Workflows\n\n| | submitted | completed | degraded | dead-lettered / failed | canceled | unfinished | lost | completed %% | p50 latency | p99 latency |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Sides {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %.1f | %.2f s | %.2f s |\n", s.Name, s.Submitted, s.Completed, s.Degraded,
			s.DeadLettered+s.Failed, s.Canceled, s.Unfinished, s.Lost, s.CompletedPct, s.LatencyP50s, s.LatencyP99s)
	}
	fmt.Fprintf(w, "\n## LLM calls\n\n| | calls | without an answer | failed at the providers | prompt tokens on failed calls |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Sides {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d |\n", s.Name, s.CallsTotal, s.WastedCalls, s.FailedCallsAtProviders, s.TokensOnFailedCalls)
	}
	for _, s := range r.Sides {
		fmt.Fprintf(w, "\n%s, per target and outcome:\n\n| target | outcome | calls |\n| --- | --- | ---: |\n", s.Name)
		var ts []string
		for t := range s.Calls {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		for _, t := range ts {
			var cs []string
			for c := range s.Calls[t] {
				cs = append(cs, c)
			}
			sort.Strings(cs)
			for _, c := range cs {
				fmt.Fprintf(w, "| %s | %s | %d |\n", t, c, s.Calls[t][c])
			}
		}
		if len(s.DeadLetterReasons) > 0 {
			fmt.Fprintf(w, "\n%s workflows that did not complete, by class: %v\n", s.Name, s.DeadLetterReasons)
		}
	}
	for _, s := range r.Sides {
		if len(s.CallsWhileOpen) > 0 {
			fmt.Fprintf(w, "\n## %s: calls to targets with an open breaker\n\n| target | first opened at | open for | stretches | calls while open | allowed (one probe per cooldown) |\n| --- | ---: | ---: | ---: | ---: | ---: |\n", s.Name)
			for _, o := range s.CallsWhileOpen {
				fmt.Fprintf(w, "| %s | %.1f s | %.1f s | %d | %d | %d |\n", o.Target, o.FirstOpenedAtSecond, o.OpenSeconds, o.Stretches, o.Calls, o.AllowedProbes)
			}
		}
	}
	for _, s := range r.Sides {
		if len(s.Reaction) > 0 {
			fmt.Fprintf(w, "\n## %s: reaction to outages\n\n| provider | down | traffic left after (breaker open) | calls while down (failed) | traffic back after recovery |\n| --- | --- | ---: | ---: | ---: |\n", s.Name)
			for _, x := range s.Reaction {
				fmt.Fprintf(w, "| %s | %.0f–%.0f s | %s | %d (%d) | %s |\n", x.Provider, x.DownFromSecond, x.DownToSecond, secs(x.LeftAfterSeconds),
					x.CallsWhileDown, x.FailedWhileDown, secs(x.ReturnedAfterSeconds))
			}
		}
	}
	fmt.Fprintf(w, "\n## Over time (10 s buckets, by call start)\n\n| from | ")
	for _, s := range r.Sides {
		fmt.Fprintf(w, "%s answers | %s fallback share | %s calls without answer | ", s.Name, s.Name, s.Name)
	}
	fmt.Fprintf(w, "\n| ---: |%s\n", strings.Repeat(" ---: | ---: | ---: |", len(r.Sides)))
	rows := map[int][]string{}
	var keys []int
	for i, s := range r.Sides {
		for _, b := range s.FallbackRate {
			if rows[b.FromSecond] == nil {
				rows[b.FromSecond] = make([]string, len(r.Sides))
				keys = append(keys, b.FromSecond)
			}
			rows[b.FromSecond][i] = fmt.Sprintf(" %d | %.0f%% | %d |", b.Answers, 100*b.FallbackShare, b.FailedCalls)
		}
	}
	sort.Ints(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "| %d s |", k)
		for _, c := range rows[k] {
			if c == "" {
				c = " 0 | – | 0 |"
			}
			fmt.Fprint(w, c)
		}
		fmt.Fprintln(w)
	}
}
