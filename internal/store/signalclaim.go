package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrSignalSettled is returned for an idempotency key's send that was
// kept or delivered already, by another sender of the key: there is
// nothing left to do.
var ErrSignalSettled = errors.New("the idempotency key's send was finished by another sender")

// signalClaimScript moves the lease of an idempotency key's claim (KEYS[5]) to
// ARGV[2] (ms since the epoch), if the send is still 'sending' and sender
// ARGV[1] holds the claim. Returns 1 if it did, else 0.
var signalClaimScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[5])
if not cur then return 0 end
local r = cjson.decode(cur)
if r.st ~= 'sending' or r.own ~= ARGV[1] then return 0 end
r.lease = tonumber(ARGV[2])
redis.call('SET', KEYS[5], cjson.encode(r), 'KEEPTTL')
return 1
`)

// RenewSignalClaim extends sender id's claim on idempotency key idemKey
// of signal name (match) to lease from now; false if the claim is not
// id's (it lapsed and another sender took it over) or the send is kept
// or delivered.
func (s *Store) RenewSignalClaim(ctx context.Context, name, match, idemKey, id string, lease time.Duration) (bool, error) {
	return s.moveSignalClaim(ctx, name, match, idemKey, id, s.now().Add(lease).UnixMilli())
}

// ReleaseSignalClaim ends sender id's claim on idempotency key idemKey at
// once, a send it cut short: the key's next sender finishes it, without
// waiting for the lease to lapse.
func (s *Store) ReleaseSignalClaim(ctx context.Context, name, match, idemKey, id string) error {
	_, err := s.moveSignalClaim(ctx, name, match, idemKey, id, 0)
	return err
}

func (s *Store) moveSignalClaim(ctx context.Context, name, match, idemKey, id string, until int64) (bool, error) {
	n, err := signalClaimScript.Run(ctx, s.rdb, sigKeys(name, match, idemKey), id, until).Int()
	if err != nil {
		return false, fmt.Errorf("store: signal %s: claim of an idempotency key: %w", name, err)
	}
	return n == 1, nil
}
