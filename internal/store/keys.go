// Package store keeps agentq's state in Redis: workflow records, step
// records with their checkpoints, and the Lua scripts that settle steps
// exactly once. It knows nothing of providers. Every key is under
// "agentq:", and all keys of one workflow share the hash tag {wf:<id>} so
// each script touches one slot (Redis Cluster safe).
package store

import "strconv"

// Prefix is the start of every key agentq writes.
const Prefix = "agentq:"

// wfKey is a workflow's record, steps included (scripts.go has its fields).
func wfKey(id string) string { return Prefix + "{wf:" + id + "}:wf" }
func indexKey() string       { return Prefix + "workflows" }

// openKey indexes workflows that may still have steps in flight, scored
// by when the reconciler last looked at them (creation, at first).
func openKey() string { return Prefix + "open" }

// leaderKey is the lock that elects one worker for a cluster-wide chore.
func leaderKey(chore string) string { return Prefix + "leader:" + chore }

func provTag(p string) string     { return Prefix + "{prov:" + p + "}" }
func coolingKey(p string) string  { return provTag(p) + ":cooling" }
func disabledKey(p string) string { return provTag(p) + ":disabled" }
func breakerKey(p string) string  { return provTag(p) + ":breakers" }
func inflightKey(p string) string { return provTag(p) + ":inflight" }
func rpmKey(p string) string      { return provTag(p) + ":rpm" }
func healthKey(p string, bucket int64) string {
	return provTag(p) + ":health:" + strconv.FormatInt(bucket, 10)
}

// KeyChanges is the pub/sub channel on which key state changes are announced.
const KeyChanges = Prefix + "keys:changed"
