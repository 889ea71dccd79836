package store

import (
	"testing"

	"github.com/agentq/agentq/internal/shard"
)

// The marker of an acknowledging write is in the slot of the keys it
// confirms, tagged or not (a Cluster runs WAIT on that slot's primary).
func TestTheAckMarkerSharesItsWritesSlot(t *testing.T) {
	for _, k := range []string{wfKey("wf_x"), openKey(), indexKey(), asynqPendingKey("default.3"), SignalKey("paid", "order-1")} {
		if a, b := shard.Slot(ackKey(k)), shard.Slot(k); a != b {
			t.Errorf("marker %s is in slot %d, its key %s in %d", ackKey(k), a, k, b)
		}
	}
}
