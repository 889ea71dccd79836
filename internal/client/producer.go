// Package client is the one client every face uses: the SDK's
// agentq.Client, the enqueue command and the dashboard's API and pages all
// call these methods. A Client talks to Redis (Open, Over) or to a
// dashboard's HTTP API (Remote); its verbs are the same either way.
package client

import (
	"context"
	"iter"
	"time"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
)

// driver is where the workflows are: Redis (redisDriver) or a dashboard's
// HTTP API (apiclient.Client).
type driver interface {
	SubmitWorkflow(ctx context.Context, wspec *spec.Spec, opts ...producer.SubmitOption) (producer.Submission, error)
	Spec(ctx context.Context, id string) (*spec.Spec, error)
	Status(ctx context.Context, id string) (*producer.Workflow, error)
	Result(ctx context.Context, id string) (*producer.Result, error)
	Instances(ctx context.Context, id, step string, offset, limit int) (*producer.InstancePage, error)
	Wait(ctx context.Context, id string, poll time.Duration, onChange func(*producer.Workflow)) (*producer.Workflow, error)
	Events(ctx context.Context, id, after string) iter.Seq2[record.Event, error]
	Cancel(ctx context.Context, id string) (string, error)
	List(ctx context.Context, state string, limit int) ([]*producer.Workflow, error)
	ListPage(ctx context.Context, o producer.ListOptions) ([]*producer.Workflow, error)
	DeadLetters(ctx context.Context, class string) ([]producer.DeadLetter, error)
	DeadLetterTask(ctx context.Context, id, step string) (string, error)
	DeadLetterDetail(ctx context.Context, task string) (*producer.DeadLetterDetail, error)
	Requeue(ctx context.Context, task string) error
	RequeueAll(ctx context.Context, class string) (int, error)
	Discard(ctx context.Context, task string) error
	Queues(ctx context.Context) ([]producer.QueueInfo, error)
	PauseQueue(ctx context.Context, name string) (producer.QueueChange, error)
	ResumeQueue(ctx context.Context, name string) (producer.QueueChange, error)
	Schedules(ctx context.Context) ([]producer.ScheduleInfo, error)
	Decide(ctx context.Context, id, step string, approve bool, comment, by string) (string, error)
	Signal(ctx context.Context, s producer.Signal) (*producer.SignalResult, error)
	PutSpec(ctx context.Context, name string, wspec *spec.Spec) (*producer.StoredSpec, error)
	StoredSpecs(ctx context.Context) ([]producer.StoredSpec, error)
	StoredSpecOf(ctx context.Context, name string, version int) (*spec.Spec, int, error)
	Rerun(ctx context.Context, id, from string) (int, error)
	Keys(ctx context.Context) ([]record.KeyInfo, error)
	EnableKeys(ctx context.Context, ref string, all bool) (record.EnableResult, error)
}

var (
	_ driver = redisDriver{}
	_ driver = (*apiclient.Client)(nil)
)

// Client applies every verb to workflows, queues, dead letters and keys.
// It is safe for concurrent use. Close it when done.
type Client struct {
	driver
	cfg    config.Config
	remote bool
	close  func() error
	mon    *monitor // the workers' shared breaker and health state (Over); nil otherwise
}

// Remote is a Client over a dashboard's HTTP API at url, signed in with
// token (empty: none); cfg prices its workflows (Cost) and checks specs
// before they are sent (ParseSpec). It makes no call until a verb is used.
func Remote(cfg config.Config, url, token string) *Client {
	return &Client{driver: apiclient.New(url, token), cfg: cfg, remote: true, close: func() error { return nil }}
}

// Close releases what the client holds (its Redis connection, if it
// opened one).
func (c *Client) Close() error { return c.close() }
