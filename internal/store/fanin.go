package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// fanInLayout marks a workflow record whose dependents count their settled
// inputs ("<step>.nin", see settleScript). Records an earlier agentq wrote
// lack it: they kept only the inputs' settled flags, and MigrateFanIn
// counts those once.
const fanInLayout = "1"

// migrateFanInScript gives a record of the earlier layout its fan-in
// counters, from the settled flags it has. KEYS: wf. ARGV: per step with
// inputs: its nin field, its number of inputs, their settled fields.
// Returns 1 (migrated), 0 (already counted) or -1 (gone, or the one-key
// layout before nsettled, which cannot be migrated).
var migrateFanInScript = redis.NewScript(`
local K = KEYS[1]
local h = redis.call('HMGET', K, 'nsettled', 'fanin')
if not h[1] then return -1 end
if h[2] then return 0 end
local i = 1
while i <= #ARGV do
  local nd = tonumber(ARGV[i + 1])
  local n = 0
  if nd > 0 then
    local f = redis.call('HMGET', K, unpack(ARGV, i + 2, i + 1 + nd))
    for x = 1, nd do if f[x] == '1' then n = n + 1 end end
  end
  redis.call('HSET', K, ARGV[i], n)
  i = i + 2 + nd
end
redis.call('HSET', K, 'fanin', '` + fanInLayout + `')
return 1
`)

// MigrateFanIn counts the settled inputs of every step of a workflow an
// earlier agentq wrote (inputs: each step's depends_on), so that Settle
// can decide its fan-in by counters. Idempotent; ErrOldLayout for a
// record too old to migrate.
func (s *Store) MigrateFanIn(ctx context.Context, wf string, inputs map[string][]string) error {
	var args []any
	for step, deps := range inputs {
		args = append(args, step+".nin", len(deps))
		for _, d := range deps {
			args = append(args, d+".settled")
		}
	}
	n, err := migrateFanInScript.Run(ctx, s.rdb, []string{wfKey(wf)}, args...).Int()
	switch {
	case err != nil:
		return fmt.Errorf("store: migrate %s: %w", wf, err)
	case n < 0:
		return fmt.Errorf("store: migrate %s: %w", wf, ErrOldLayout)
	}
	return nil
}
