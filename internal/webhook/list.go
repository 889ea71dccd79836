package webhook

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// Delivery is one webhook delivery as the dashboard lists it: ids, states
// and the last error, never the URL's path or query (they may carry a
// token) and never the body.
type Delivery struct {
	EventID  string `json:"event_id"` // the webhook-id
	TaskID   string `json:"task_id"`
	Workflow string `json:"workflow"`
	Event    string `json:"event"`
	Host     string `json:"host"`
	// State is pending, active, scheduled, retrying, archived (dead: its
	// retries are spent or its destination was refused) or delivered.
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	LastFailedAt  *time.Time `json:"last_failed_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// List returns the deliveries the webhooks queue holds, at most limit of
// each state, those waiting or failed first, then the newest.
func List(insp *asynq.Inspector, limit int) ([]Delivery, error) {
	lists := []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){insp.ListRetryTasks, insp.ListArchivedTasks,
		insp.ListActiveTasks, insp.ListPendingTasks, insp.ListScheduledTasks, insp.ListCompletedTasks}
	out := []Delivery{}
	for _, list := range lists {
		infos, err := list(Queue, asynq.PageSize(limit))
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return out, nil // no webhook was ever enqueued
		}
		if err != nil {
			return nil, err
		}
		for _, info := range infos {
			if info.Type == TypeDelivery {
				out = append(out, deliveryOf(info))
			}
		}
	}
	rank := map[string]int{"retrying": 0, "archived": 1, "active": 2, "pending": 3, "scheduled": 4, "delivered": 5}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].State] < rank[out[j].State] })
	return out, nil
}

func deliveryOf(info *asynq.TaskInfo) Delivery {
	var p payload
	_ = json.Unmarshal(info.Payload, &p)
	d := Delivery{EventID: p.MsgID, TaskID: info.ID, Workflow: p.Workflow, Event: p.Event, Host: hostOf(p.URL),
		State: info.State.String(), Attempts: info.Retried,
		LastError: strings.TrimSuffix(info.LastErr, ": "+asynq.SkipRetry.Error())}
	switch info.State {
	case asynq.TaskStateRetry:
		d.State = "retrying"
	case asynq.TaskStateCompleted:
		d.State = "delivered"
		d.Attempts++
	case asynq.TaskStateArchived, asynq.TaskStateActive:
		d.Attempts++ // the attempt that archived it, or the one running
	}
	if !info.LastFailedAt.IsZero() {
		t := info.LastFailedAt
		d.LastFailedAt = &t
	}
	if !info.NextProcessAt.IsZero() && (info.State == asynq.TaskStateRetry || info.State == asynq.TaskStateScheduled) {
		t := info.NextProcessAt
		d.NextAttemptAt = &t
	}
	return d
}
