package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// dropSendScript deletes an idempotency key's record (KEYS[5]) if it is
// the first send of the key by sender ARGV[1], still 'sending' under its
// claim: the send did nothing. Returns 1 if it did, else 0.
var dropSendScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[5])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.st ~= 'sending' or r.own ~= ARGV[1] or r.id ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[5])
return 1
`)

// DropSignalSend forgets the send of idempotency key idemKey that sender
// id began and that did nothing (refused before it kept or delivered the
// signal): the key is free, and its next send is a first send, with its
// own data. A send id took over (cut short by another sender), or one
// kept or delivered, is left as it is; false then.
func (s *Store) DropSignalSend(ctx context.Context, name, match, idemKey, id string) (bool, error) {
	n, err := dropSendScript.Run(ctx, s.rdb, sigKeys(name, match, idemKey), id).Int()
	if err != nil {
		return false, fmt.Errorf("store: signal %s: drop an idempotency key's send: %w", name, err)
	}
	return n == 1, nil
}
