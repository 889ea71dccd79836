package main

import (
	"context"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cost is what one timed run cost, per step: CPU of this process (worker,
// chaosllm and the producer alike) and of redis-server (execution, I/O and
// all), the commands Redis executed (a script counts once, plus the
// commands it calls) and the microseconds it spent executing them.
// Against a server without these statistics (miniredis) it stays zero.
type Cost struct {
	ProcCPUMicros, RedisCPUMicros float64
	// LeadProcCPUMicros and LeadRedisCPUMicros are the part of the two
	// spent before the meter's mark (-inflight: the producers' submits);
	// zero without a mark.
	LeadProcCPUMicros, LeadRedisCPUMicros float64 `json:",omitempty"`
	// AllocsPerStep and AllocKiBPerStep are this process's heap
	// allocations (what its garbage collector then pays for).
	AllocsPerStep, AllocKiBPerStep float64
	CallsPerStep, MicrosPerStep    float64
	// RedisReadsPerStep is how many reads from its clients' sockets
	// Redis made a step (INFO stats' total_reads_processed): about its
	// round trips, a pipeline's commands coming in one.
	RedisReadsPerStep float64 `json:",omitempty"`
	// Top lists the commands that cost the most, "name calls µs".
	Top []string `json:",omitempty"`
	// Commands are every command's calls and µs per step, the costliest
	// first.
	Commands []CommandCost `json:",omitempty"`
}

// CommandCost is one Redis command's calls and execution µs per step.
type CommandCost struct {
	Name          string
	Calls, Micros float64
}

// meter measures a timed run, from start to stop (reading the results
// afterwards is not counted).
type meter struct {
	rdb   *redis.Client
	steps int
	from  cpuMark
	mid   *cpuMark // mark's, if it was called
	stats bool     // Redis's statistics were reset at the start
	cost  Cost
}

func (m *meter) start(ctx context.Context) {
	m.stats = m.rdb.ConfigResetStat(ctx).Err() == nil
	m.from = markCPU(ctx, m.rdb)
}

// mark splits the run: what was spent until now is also reported on its
// own (Cost's Lead figures).
func (m *meter) mark(ctx context.Context) {
	c := markCPU(ctx, m.rdb)
	m.mid = &c
}

func (m *meter) stop(ctx context.Context) {
	if !m.stats || m.steps == 0 {
		return
	}
	to := markCPU(ctx, m.rdb)
	m.cost = commandCost(ctx, m.rdb, m.steps)
	n := float64(m.steps)
	m.cost.RedisReadsPerStep = redisInfo(ctx, m.rdb, "stats", "total_reads_processed") / n
	m.cost.ProcCPUMicros = float64((to.proc - m.from.proc).Microseconds()) / n
	m.cost.RedisCPUMicros = float64((to.redis - m.from.redis).Microseconds()) / n
	if m.mid != nil {
		m.cost.LeadProcCPUMicros = float64((m.mid.proc - m.from.proc).Microseconds()) / n
		m.cost.LeadRedisCPUMicros = float64((m.mid.redis - m.from.redis).Microseconds()) / n
	}
	m.cost.AllocsPerStep = float64(to.mallocs-m.from.mallocs) / n
	m.cost.AllocKiBPerStep = float64(to.allocd-m.from.allocd) / 1024 / n
}

// commandCost reads Redis's command statistics after a run of steps steps.
func commandCost(ctx context.Context, rdb *redis.Client, steps int) Cost {
	var c Cost
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return c
	}
	type row struct {
		name         string
		calls, usecs float64
	}
	var rows []row
	for _, line := range strings.Split(info, "\n") {
		// cmdstat_evalsha:calls=10,usec=55,usec_per_call=5.50,...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		r := row{name: strings.TrimPrefix(name, "cmdstat_")}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				r.calls = f
			case "usec":
				r.usecs = f
			}
		}
		// the meter's own (Redis 7 names subcommands "config|resetstat")
		if base, _, _ := strings.Cut(r.name, "|"); base == "config" || base == "info" {
			continue
		}
		c.CallsPerStep += r.calls / float64(steps)
		c.MicrosPerStep += r.usecs / float64(steps)
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].usecs > rows[j].usecs })
	for _, r := range rows {
		c.Commands = append(c.Commands, CommandCost{Name: r.name, Calls: r.calls / float64(steps), Micros: r.usecs / float64(steps)})
	}
	for i := 0; i < len(rows) && i < 12; i++ {
		c.Top = append(c.Top, rows[i].name+" "+strconv.FormatFloat(rows[i].calls/float64(steps), 'f', 2, 64)+"/step "+
			strconv.FormatFloat(rows[i].usecs/float64(steps), 'f', 1, 64)+"µs/step")
	}
	return c
}

// redisInfo sums the values of the INFO section's fields named (0 for
// those Redis does not have, or when it does not answer).
func redisInfo(ctx context.Context, rdb *redis.Client, section string, names ...string) float64 {
	info, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return 0
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		for _, name := range names {
			if k == name {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return sum
}

// cpuMark is a reading of this process's and Redis's CPU time and of this
// process's heap allocations.
type cpuMark struct {
	proc, redis     time.Duration
	mallocs, allocd uint64
}

func markCPU(ctx context.Context, rdb *redis.Client) cpuMark {
	var m cpuMark
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs, m.allocd = ms.Mallocs, ms.TotalAlloc
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		m.proc = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m.redis = time.Duration(redisInfo(ctx, rdb, "cpu", "used_cpu_sys", "used_cpu_user") * float64(time.Second))
	return m
}
