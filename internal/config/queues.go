package config

import (
	"regexp"
	"strings"

	"github.com/agentq/agentq/internal/shard"
	"github.com/agentq/agentq/internal/webhook"
)

// Queue declares one queue, for workers and producers alike (queues: at
// the top of the configuration).
type Queue struct {
	// Weight is the queue's share of a worker's slots against the other
	// queues it serves (asynq's queue priority), when worker.queues does
	// not set it. 0: 1.
	Weight int `yaml:"weight"`
	// Shards splits the queue into this many asynq queues, each in a
	// Redis Cluster hash slot of its own, so that a cluster's primaries
	// share its load (docs/operations.md, "Sharded queues"). Every step
	// of a workflow goes to one shard, chosen by its id; workers serve
	// them all, the queue's weight split evenly; pause, resume and queue
	// list treat them as one queue. 0: 1 (no shards); at most 128. A new
	// count applies to workflows submitted after it; those already
	// running stay on the shards they began on, which workers serve
	// while any of their tasks remain (queues are listed by what Redis
	// holds).
	Shards int `yaml:"shards"`
}

// Shards are the shard counts of the declared queues that have more
// than one (nil when none has).
func (c *Config) Shards() map[string]int {
	var out map[string]int
	for name, q := range c.Queues {
		if q.Shards > 1 {
			if out == nil {
				out = map[string]int{}
			}
			out[name] = q.Shards
		}
	}
	return out
}

// queueName is what a queue may be called (the steps' queue: field
// allows the same); '.' marks a shard, so it is not allowed.
var queueName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// defaultQueues fills worker.queues, when not set, from the declared
// queues' weights, or else with dw's.
func (c *Config) defaultQueues(dw map[string]int) {
	if c.Worker.Queues != nil {
		return
	}
	if len(c.Queues) == 0 {
		c.Worker.Queues = dw
		return
	}
	c.Worker.Queues = make(map[string]int, len(c.Queues))
	for name, q := range c.Queues {
		if queueName.MatchString(name) { // a bad name is reported once, as queues.NAME
			c.Worker.Queues[name] = max(q.Weight, 1)
		}
	}
}

// badQueueNames reports whether a declared queue's name is not one.
func (c *Config) badQueueNames() bool {
	for name := range c.Queues {
		if !queueName.MatchString(name) {
			return true
		}
	}
	return false
}

// validateQueues checks the declared queues and worker.queues.
func (c *Config) validateQueues(bad func(field, format string, a ...any)) {
	for name, q := range c.Queues {
		if !queueName.MatchString(name) {
			bad("queues."+name, "%q is not a queue name (a letter, then letters, digits, '_' or '-'; at most 63)", name)
		}
		if q.Weight < 0 {
			bad("queues."+name+".weight", "%d is under 0 (0: 1)", q.Weight)
		}
		switch {
		case q.Shards < 0 || q.Shards > shard.Max:
			bad("queues."+name+".shards", "%d is not between 0 and %d (0: 1)", q.Shards, shard.Max)
		case q.Shards > 1 && name == webhook.Queue:
			bad("queues."+name+".shards", "the webhooks queue is not sharded (its deliveries go to %q)", webhook.Queue)
		}
	}
	if len(c.Worker.Queues) == 0 && !c.badQueueNames() { // else the declared queues' names were bad, and said so
		bad("worker.queues", "is empty")
	}
	for q, p := range c.Worker.Queues {
		switch {
		case q == "" || p < 1:
			bad("worker.queues", "queue %q has priority %d (want a name and a priority of 1 or more)", q, p)
		case strings.Contains(q, shard.Sep):
			base, _, _ := strings.Cut(q, shard.Sep)
			bad("worker.queues", "queue %q: a %q marks a shard; declare shards with queues.%s.shards", q, shard.Sep, base)
		}
	}
}
