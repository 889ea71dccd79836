package flow

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// A cancel of a workflow that may have children returns at once: the
// workflows under it are canceled by a tasks.TypeCancelTree task, enqueued
// (and, with durability on, confirmed) before the workflow is marked
// canceled, so that no crash between the two leaves its tree running: the
// task cancels the workflow too if the mark never came.

// MayHaveChildren reports whether a workflow of wspec can start children
// (it has a workflow: step): only those need a tree cancel.
func MayHaveChildren(wspec *spec.Spec) bool {
	for i := range wspec.Steps {
		if spec.ChildSpecName(&wspec.Steps[i]) != "" {
			return true
		}
	}
	return false
}

// CancelTreeTimeout bounds one run of a tree cancel (a tree of
// limits.max_tree_workflows' most is walked well within it); a run cut
// short is retried and walks again.
const CancelTreeTimeout = 10 * time.Minute

// CancelTreeTask is the task that cancels run gen of workflow wf (of
// wspec) and every workflow under it, on wf's default queue; a task that
// comes after a rerun leaves the new run, and the children it started,
// alone. Each cancel gets a task of its own (a random id): a second cancel
// walks the tree again.
func CancelTreeTask(wf string, gen int, wspec *spec.Spec, retention time.Duration) store.Task {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	payload, _ := json.Marshal(tasks.Payload{Workflow: wf, Step: "cancel-tree", Gen: gen})
	queue := spec.DefaultQueue
	if wspec.Defaults.Queue != "" {
		queue = wspec.Defaults.Queue
	}
	queue = TaskQueue(wf, spec.Resolved{Queue: queue, Shards: wspec.Shards[queue]})
	return store.Task{ID: wf + ":cancel-tree:" + hex.EncodeToString(nonce[:]), Queue: queue, Type: tasks.TypeCancelTree,
		Payload: payload, MaxRetry: spec.DefaultMaxRetries, Timeout: CancelTreeTimeout, Retention: retention}
}
