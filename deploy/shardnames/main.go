// Command shardnames prints the shard names of sharded queues as the Helm
// chart's worker.keda.shardNames, for queues whose names the chart does
// not carry (it knows critical, default and low):
//
//	go run github.com/agentq/agentq/deploy/shardnames search=6 batch=4 > shards.yaml
//	helm install prod deploy/helm/agentq -f shards.yaml ...
//
// Each argument is QUEUE=N, N its config.queues.QUEUE.shards.
package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentq/agentq/internal/shard"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shardnames:", err)
		os.Exit(2)
	}
}

var queueName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// run writes the values for args (QUEUE=N each) to w.
func run(w io.Writer, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no queue: give QUEUE=N, N its config.queues.QUEUE.shards (e.g. search=6)")
	}
	var b strings.Builder
	b.WriteString("worker:\n  keda:\n    shardNames:\n")
	for _, a := range args {
		q, count, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(count)
		switch {
		case !ok || err != nil:
			return fmt.Errorf("argument %q: want QUEUE=N, e.g. search=6", a)
		case !queueName.MatchString(q):
			return fmt.Errorf("argument %q: queue %q is not a queue name (a letter, then letters, digits, '_' or '-')", a, q)
		case n < 2 || n > shard.Max:
			return fmt.Errorf("argument %q: %d shards, want 2 to %d (a queue of one shard needs no names)", a, n, shard.Max)
		}
		fmt.Fprintf(&b, "      %s: [%s]\n", q, strings.Join(shard.Names(q, n), ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
