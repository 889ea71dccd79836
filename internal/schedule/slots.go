package schedule

import (
	"strconv"
	"time"

	"github.com/robfig/cron/v3"
)

// Next is the first slot of when strictly after t. An "@every D" schedule's
// slots are the multiples of D since the Unix epoch (cron's own Every
// counts from whenever it is asked, which differs between replicas);
// every other schedule's are its wall-clock times (cron's Next), in UTC
// unless the expression names a zone (CRON_TZ=).
func Next(when cron.Schedule, t time.Time) time.Time {
	if e, ok := when.(cron.ConstantDelaySchedule); ok && e.Delay > 0 {
		d := e.Delay.Nanoseconds()
		n := t.UnixNano()
		slot := n - mod(n, d) + d
		return time.Unix(0, slot).UTC()
	}
	return when.Next(t.UTC())
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Key is the idempotency key of one slot of schedule name: every replica
// that fires the slot submits with the same key, so it runs once.
func Key(name string, slot time.Time) string {
	return "schedule:" + name + ":" + strconv.FormatInt(slot.Unix(), 10)
}
