package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/hookcheck"
	"github.com/agentq/agentq/internal/shard"
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

// UnmarshalYAML reads a queue's mapping, its numbers whole numbers as
// YAML writes them: the decoder would take shards: 1.5 as 1, a count the
// file does not say. A key that is not a queue's field is reported as the
// decoder reports one (its line, "unknown field").
func (q *Queue) UnmarshalYAML(n *yaml.Node) error {
	type plain Queue
	if n.Kind != yaml.MappingNode {
		return n.Decode((*plain)(q)) // the decoder's own error for a queue that is not a mapping
	}
	var problems []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var into *int
		switch k.Value {
		case "weight":
			into = &q.Weight
		case "shards":
			into = &q.Shards
		default:
			problems = append(problems, fmt.Sprintf("line %d: field %s not found in type config.Queue", k.Line, k.Value))
			continue
		}
		if tag := v.ShortTag(); v.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!null") {
			problems = append(problems, fmt.Sprintf("line %d: queue %s: %s, not a whole number", v.Line, k.Value, shownScalar(v)))
			continue
		}
		if err := v.Decode(into); err != nil {
			var te *yaml.TypeError
			if errors.As(err, &te) {
				problems = append(problems, te.Errors...)
				continue
			}
			return err
		}
	}
	if len(problems) > 0 {
		return &yaml.TypeError{Errors: problems}
	}
	return nil
}

// shownScalar says what a value is, for a problem: "1.5 is a
// floating-point number", "\"2\" is a string", "is a list".
func shownScalar(n *yaml.Node) string {
	switch {
	case n.Kind != yaml.ScalarNode:
		return "is " + yamlKind(n)
	case n.ShortTag() == "!!str":
		return strconv.Quote(n.Value) + " is a string"
	}
	return n.Value + " is " + yamlKind(n)
}

// yamlKind says what a YAML value is.
func yamlKind(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.ShortTag() == "!!float":
		return "a floating-point number"
	case n.ShortTag() == "!!bool":
		return "a boolean"
	case n.ShortTag() == "!!str":
		return "a string"
	}
	return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
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
		case q.Shards > 1 && name == hookcheck.Queue:
			bad("queues."+name+".shards", "the webhooks queue is not sharded (its deliveries go to %q)", hookcheck.Queue)
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
