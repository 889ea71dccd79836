package flow_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/redistest"
)

// What Redis answers while it cannot serve, a node that refuses the
// connection and go-redis' own "not now" are Redis unavailable, wrapped
// or not; an answer that merely mentions one of those codes (a script's
// own error) is not, nor is anything that is not Redis's.
func TestRedisUnavailableReadsTheLeadingCode(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	srv.Start()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	// the server's own error reply, with the text a test chooses
	reply := func(text string) error {
		t.Helper()
		err := rdb.Eval(t.Context(), "return redis.error_reply(ARGV[1])", nil, text).Err()
		if err == nil {
			t.Fatalf("no error for %q", text)
		}
		return err
	}
	unavailable := map[string]error{}
	for _, text := range []string{"CLUSTERDOWN The cluster is down", "CLUSTERDOWN Hash slot not served", "TRYAGAIN Multiple keys request during rehashing of slot",
		"LOADING Redis is loading the dataset in memory", "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
		"READONLY You can't write against a read only replica.", "NOREPLICAS Not enough good replicas to write.",
		"MOVED 5718 127.0.0.1:7001", "ASK 5718 127.0.0.1:7001"} {
		unavailable[text] = reply(text)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	refusing := redis.NewClient(&redis.Options{Addr: gone, MaxRetries: -1})
	t.Cleanup(func() { refusing.Close() })
	unavailable["a refused connection"] = refusing.Set(t.Context(), "k", "v", 0).Err()
	closed := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	closed.Close()
	unavailable["a closed client"] = closed.Ping(t.Context()).Err()
	unavailable["no connection free in time"] = redis.ErrPoolTimeout
	for what, err := range unavailable {
		for _, e := range []error{err, fmt.Errorf("settle step a: %w", err)} {
			if !flow.RedisUnavailable(e) || !flow.Unavailable(e) {
				t.Errorf("%s (%v) is not read as Redis unavailable", what, e)
			}
		}
	}

	_, scriptErr := rdb.Eval(t.Context(), "error('CLUSTERDOWN in a script of ours')", nil).Result()
	_, missing := rdb.Get(t.Context(), "no-such-key").Result()
	answers := map[string]error{
		"a script's error reply that mentions the codes": reply("ERR the script says CLUSTERDOWN, TRYAGAIN, LOADING, READONLY"),
		"a script's own error":                           scriptErr,
		"a code that only starts like one":               reply("CLUSTERDOWNISH not a code"),
		"a code of our own":                              reply("NOT FOUND"),
		"a missing key":                                  missing,
		"an error that is not Redis's":                   errors.New("CLUSTERDOWN said a spec"),
		"no error":                                       nil,
	}
	for what, err := range answers {
		if what != "no error" && err == nil {
			t.Fatalf("%s: no error", what)
		}
		if flow.RedisUnavailable(err) || flow.RedisUnavailable(fmt.Errorf("x: %w", err)) {
			t.Errorf("%s (%v) is read as Redis unavailable", what, err)
		}
	}
}
