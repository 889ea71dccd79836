package store

// Budgets: reservations against a limit per period, cluster-wide, so that
// concurrent callers never spend past it together (docs/budgets.md).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Budgets holds reservations against budgets: one Redis hash per budget key
// and period window (agentq:{budget:<key>}:<window start, Unix ms>:<period>), holding the
// settled total ("used") and one field per reservation not yet settled
// ("r:<id>" = amount and lease expiry). A reservation is admitted only if
// the settled total, the live reservations and it fit under the limit,
// checked and written by one script; so however many workers reserve at
// once, the admitted amounts never pass the limit. The units are the
// caller's (tokens, micro-dollars).
type Budgets struct {
	rdb   redis.UniversalClient
	now   func() time.Time
	lease time.Duration
	keep  time.Duration
}

// BudgetOptions tune NewBudgets. The zero value is production's.
type BudgetOptions struct {
	// Now is the clock; nil: time.Now. Windows and leases are read on it.
	Now func() time.Time
	// Lease is how long a reservation that is never settled (its worker
	// died) holds its amount; 0 means 10m. It must outlast the longest
	// call.
	Lease time.Duration
	// Keep is how long a budget without a period (period 0: one window
	// for the key's whole life, such as a workflow's) is kept after its
	// last reservation or settle; 0 means 7 days.
	Keep time.Duration
}

// NewBudgets returns the budgets store on rdb.
func NewBudgets(rdb redis.UniversalClient, o BudgetOptions) *Budgets {
	b := &Budgets{rdb: rdb, now: o.Now, lease: o.Lease, keep: o.Keep}
	if b.now == nil {
		b.now = time.Now
	}
	if b.lease <= 0 {
		b.lease = 10 * time.Minute
	}
	if b.keep <= 0 {
		b.keep = 7 * 24 * time.Hour
	}
	return b
}

// budgetSlack keeps a window's hash a little past the last settle it can
// take (its end plus a lease), for clocks that differ between workers.
const budgetSlack = time.Minute

// budgetReserveScript admits a reservation if it fits.
// KEYS: the window's hash. ARGV: now ms, reservation id, amount, limit,
// lease expiry ms, TTL ms.
// Returns {1, remaining after it} or {0, remaining}. Expired reservations
// are dropped on the way.
var budgetReserveScript = redis.NewScript(`
local now, amount, limit = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local all = redis.call('HGETALL', KEYS[1])
local used, held = 0, 0
for i = 1, #all, 2 do
  local f, v = all[i], all[i + 1]
  if f == 'used' then
    used = tonumber(v)
  elseif string.sub(f, 1, 2) == 'r:' then
    local sp = string.find(v, ' ', 1, true)
    if tonumber(string.sub(v, sp + 1)) <= now then
      redis.call('HDEL', KEYS[1], f)
    else
      held = held + tonumber(string.sub(v, 1, sp - 1))
    end
  end
end
local left = limit - used - held
if amount > left then
  return {0, left}
end
redis.call('HSET', KEYS[1], 'r:' .. ARGV[2], ARGV[3] .. ' ' .. ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {1, left - amount}
`)

// budgetSettleScript replaces a reservation by what was spent. A
// reservation whose lease lapsed is charged all the same: the call was
// made. A window whose hash is gone takes nothing if it ended long ago
// (ARGV[4] 0); if it is still live, the hash was lost (a Redis promotion
// that did not have it, an eviction) and is made again with the charge
// (expiring ARGV[4] ms from now), so the window does not overspend by the
// calls it had taken.
// KEYS: the window's hash. ARGV: reservation id, actual, TTL ms (0: keep
// the hash's own), TTL ms of a live window's hash made again (0: ended).
// Returns 1 if the reservation was live, 0 if it had lapsed, -1 if the
// window is gone, -2 if its hash was made again.
var budgetSettleScript = redis.NewScript(`
local found = redis.call('EXISTS', KEYS[1]) == 1
if not found and tonumber(ARGV[4]) <= 0 then
  return -1
end
local had = redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1])
if tonumber(ARGV[2]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'used', ARGV[2])
end
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif not found then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
if not found then return -2 end
return had
`)

// ErrBadBudgetKey is returned for an empty budget key or one with a brace
// (the key's hash tag).
var ErrBadBudgetKey = errors.New("store: a budget key is non-empty and has no braces")

// Reserve asks for amount under limit in key's current window of period:
// windows are period long and aligned to the Unix epoch (the same on every
// worker); period 0 is one window for the key's life (kept BudgetOptions.
// Keep after its last use). ok false: refused, and nothing is held. id names
// the reservation for Settle; remaining is what the window has left after
// it (or, refused, before it; negative if settles overspent it). A
// reservation never settled lapses after the lease.
func (b *Budgets) Reserve(ctx context.Context, key string, limit, amount int64, period time.Duration) (id string, ok bool, remaining int64, err error) {
	if key == "" || strings.ContainsAny(key, "{}") {
		return "", false, 0, ErrBadBudgetKey
	}
	now := b.now()
	window, ttl := b.window(now, period)
	var r [8]byte
	_, _ = rand.Read(r[:])
	id = hex.EncodeToString(r[:]) + "@" + window
	res, err := budgetReserveScript.Run(ctx, b.rdb, []string{budgetKey(key, window)},
		now.UnixMilli(), id, amount, limit, now.Add(b.lease).UnixMilli(), ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return "", false, 0, fmt.Errorf("store: budget %s: reserve: %w", key, err)
	}
	if res[0] != 1 {
		return "", false, res[1], nil
	}
	return id, true, res[1], nil
}

// Settle replaces reservation id of key by actual (0 gives it all back),
// in the window it was made in. A late settle (the lease lapsed) still
// charges actual; one after the window's hash expired charges nothing.
func (b *Budgets) Settle(ctx context.Context, key, id string, actual int64) error {
	_, window, found := strings.Cut(id, "@")
	if !found || key == "" || strings.ContainsAny(key, "{}") {
		return fmt.Errorf("store: budget %s: settle: bad reservation id %q", key, id)
	}
	var ttl, live int64 // a window of a period keeps the expiry Reserve set
	if window == "" {
		ttl, live = b.keep.Milliseconds(), b.keep.Milliseconds()
	} else if live = b.liveFor(window).Milliseconds(); live < 0 {
		live = 0
	}
	if err := budgetSettleScript.Run(ctx, b.rdb, []string{budgetKey(key, window)}, id, max(actual, 0), ttl, live).Err(); err != nil {
		return fmt.Errorf("store: budget %s: settle: %w", key, err)
	}
	return nil
}

// Spent is what key's current window has settled and holds in live
// reservations, as Reserve would count them.
func (b *Budgets) Spent(ctx context.Context, key string, period time.Duration) (used, held int64, err error) {
	now := b.now()
	window, _ := b.window(now, period)
	all, err := b.rdb.HGetAll(ctx, budgetKey(key, window)).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("store: budget %s: %w", key, err)
	}
	for f, v := range all {
		if f == "used" {
			used, _ = strconv.ParseInt(v, 10, 64)
			continue
		}
		amt, exp, _ := strings.Cut(v, " ")
		if e, _ := strconv.ParseInt(exp, 10, 64); strings.HasPrefix(f, "r:") && e > now.UnixMilli() {
			n, _ := strconv.ParseInt(amt, 10, 64)
			held += n
		}
	}
	return used, held, nil
}

// window names now's window of period ("" for period 0) and how long its
// hash must live from now: to the window's end plus a lease and some
// slack, or Keep for period 0.
func (b *Budgets) window(now time.Time, period time.Duration) (string, time.Duration) {
	if period <= 0 {
		return "", b.keep
	}
	ms, p := now.UnixMilli(), max(period.Milliseconds(), 1)
	start := ms - ms%p
	end := time.UnixMilli(start + p)
	// the period is in the name too: a budget whose period changes starts
	// afresh rather than sharing a window that starts at the same time
	return strconv.FormatInt(start, 10) + ":" + period.String(), end.Sub(now) + b.lease + budgetSlack
}

// liveFor is how much longer the hash of window (a period's, as window
// names it) lives: to the window's end plus a lease and some slack, as
// Reserve sets it; 0 for a name it cannot read.
func (b *Budgets) liveFor(window string) time.Duration {
	start, period, _ := strings.Cut(window, ":")
	ms, err1 := strconv.ParseInt(start, 10, 64)
	p, err2 := time.ParseDuration(period)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.UnixMilli(ms).Add(p).Sub(b.now()) + b.lease + budgetSlack
}

func budgetKey(key, window string) string {
	k := Prefix + "{budget:" + key + "}"
	if window != "" {
		k += ":" + window
	}
	return k
}
