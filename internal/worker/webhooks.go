package worker

import (
	"log/slog"
	"maps"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/webhook"
)

// webhooks is what a worker needs to send webhooks (docs/webhooks.md): the
// zero value, for a configuration without webhooks.secret, sends none and
// serves the configured queues.
type webhooks struct {
	notify  *flow.Webhooks   // for the step handler; nil: no workflow is notified
	handler *webhook.Handler // delivers webhook tasks; nil: the webhooks queue is not served
	queues  map[string]int   // the worker's queues, with the webhooks queue when it delivers
}

// newWebhooks builds them from the configuration; observe hears each
// delivery attempt (the metrics).
func newWebhooks(cfg config.Config, log *slog.Logger, observe func(event, result string)) (webhooks, error) {
	w := webhooks{queues: cfg.Worker.Queues}
	c := cfg.Webhooks
	if !c.Enabled() {
		return w, nil
	}
	h, err := webhook.NewHandler(webhook.Options{Secret: c.Secret.Reveal(), Allow: c.Allow, Logger: log, Observe: observe})
	if err != nil {
		return w, err
	}
	w.handler, w.notify = h, app.Webhooks(cfg)
	if _, listed := w.queues[webhook.Queue]; !listed {
		w.queues = maps.Clone(w.queues)
		w.queues[webhook.Queue] = 1
	}
	return w, nil
}

// register serves webhook tasks on mux, when this worker delivers them.
func (w webhooks) register(mux *asynq.ServeMux) {
	if w.handler != nil {
		mux.Handle(webhook.TypeDelivery, w.handler)
	}
}

// retryDelay is steps' retry delay, with deliveries waiting
// webhook.DefaultBackoff.
func (w webhooks) retryDelay(steps asynq.RetryDelayFunc, random func() float64) func(int, error, *asynq.Task) time.Duration {
	return webhook.RetryDelay(webhook.DefaultBackoff, random, steps)
}
