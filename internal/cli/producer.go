package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
)

// producer is what the enqueue commands need: engine.Client over Redis, or
// apiclient.Client over a dashboard's HTTP API (--server).
type producer interface {
	SubmitWorkflow(ctx context.Context, spec *engine.Spec, opts ...engine.SubmitOption) (engine.Submission, error)
	Status(ctx context.Context, id string) (*engine.Workflow, error)
	Result(ctx context.Context, id string) (*engine.Result, error)
	Instances(ctx context.Context, id, step string, offset, limit int) (*engine.InstancePage, error)
	Wait(ctx context.Context, id string, poll time.Duration, onChange func(*engine.Workflow)) (*engine.Workflow, error)
	Cancel(ctx context.Context, id string) (string, error)
	List(ctx context.Context, state string, limit int) ([]*engine.Workflow, error)
	DeadLetters(ctx context.Context, class string) ([]engine.DeadLetter, error)
	DeadLetterDetail(ctx context.Context, task string) (*engine.DeadLetterDetail, error)
	Requeue(ctx context.Context, task string) error
	RequeueAll(ctx context.Context, class string) (int, error)
	Discard(ctx context.Context, task string) error
	Queues(ctx context.Context) ([]engine.QueueInfo, error)
	PauseQueue(ctx context.Context, name string) (engine.QueueChange, error)
	ResumeQueue(ctx context.Context, name string) (engine.QueueChange, error)
	Schedules(ctx context.Context) ([]engine.ScheduleInfo, error)
	Decide(ctx context.Context, id, step string, approve bool, comment, by string) (string, error)
	Rerun(ctx context.Context, id, from string) (int, error)
}

var (
	_ producer = (*engine.Client)(nil)
	_ producer = (*apiclient.Client)(nil)
)

// serverURL is --server, else AGENTQ_SERVER; empty: talk to Redis.
func (c *common) serverURL(cmd *cobra.Command) string {
	if fl := cmd.Flags().Lookup("server"); fl != nil && fl.Value.String() != "" {
		return fl.Value.String()
	}
	v, _ := c.env.lookup("AGENTQ_SERVER")
	return v
}

// openProducer connects to the dashboard (--server) or to Redis.
func (c *common) openProducer(cmd *cobra.Command, cfg config.Config) (producer, func(), error) {
	if u := c.serverURL(cmd); u != "" {
		token, _ := c.env.lookup("AGENTQ_DASHBOARD_TOKEN")
		return apiclient.New(u, token), func() {}, nil
	}
	c.sayWhichRedis(cmd, cfg)
	cl, err := app.Connect(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	return cl.Client, func() { cl.Close() }, nil
}

// withClient loads the configuration, opens a producer, runs f, closes.
func withClient(cmd *cobra.Command, c *common, f func(producer) error) error {
	cfg, err := c.load(cmd)
	if err != nil {
		return err
	}
	p, closeP, err := c.openProducer(cmd, cfg)
	if err != nil {
		return err
	}
	defer closeP()
	return f(p)
}
