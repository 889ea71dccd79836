package flow

import (
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Unavailable reports whether err says Redis did not answer (a read that
// may be tried again): ErrUnavailable, or the connection's own failure.
func Unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || RedisUnavailable(err)
}

// RedisUnavailable reports an error that says Redis could not be reached
// or cannot serve now, as opposed to an answer: the connection's failure
// (refused, reset, timed out, closed: a node that died and that the
// cluster has not replaced yet answers so), go-redis's own "not now"
// (its client closed under a command by a topology change, no connection
// free in time) and the answers Redis gives while it cannot serve (see
// notNow).
func RedisUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	return notNow[code]
}

// notNow are the codes that open the error replies Redis gives while it
// cannot serve: the cluster is down or lost a primary (CLUSTERDOWN), a
// slot is moving (TRYAGAIN), the data set is loading (LOADING), a replica
// lost its primary (MASTERDOWN), the node was demoted to a replica
// (READONLY), too few replicas (NOREPLICAS), the slot has another owner
// now (MOVED, ASK: a command sent on a node's own connection, as a
// confirmed write is, after a failover; the store reloads the slots, so
// the next try goes to the new owner). Only the reply's leading code
// counts: an error that merely mentions one (a script's own error text)
// is an answer.
var notNow = map[string]bool{"CLUSTERDOWN": true, "TRYAGAIN": true, "LOADING": true, "MASTERDOWN": true, "READONLY": true, "NOREPLICAS": true,
	"MOVED": true, "ASK": true}

// RetryAfter is how long a caller told that Redis is unavailable is asked
// to wait before trying again (the dashboard API's Retry-After).
const RetryAfter = 5 * time.Second

// ErrUnavailable wraps a read that failed because Redis did not answer
// (refused, reset, timed out, loading): the workflow goes on, only its
// state could not be read. Wait returns it at once; a caller that waits
// through outages (enqueue --wait) calls Wait again.
var ErrUnavailable = errors.New("redis is not answering")
