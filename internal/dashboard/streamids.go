package dashboard

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
)

// maxWorkflowIDBytes bounds a workflow id in a request. Ids are "wf_"
// and 20 characters; a longer one names no workflow, and is refused
// before anything is read for it.
const maxWorkflowIDBytes = 128

// checkWorkflowID refuses an id no workflow can have: empty, longer than
// maxWorkflowIDBytes, or holding anything but letters, digits and
// "_-.:" (a brace would change the hash tag of its keys). The message
// quotes a long id bounded (flow.BoundID).
func checkWorkflowID(id string) error {
	if id == "" || len(id) > maxWorkflowIDBytes {
		return fmt.Errorf("workflow id %q is %d bytes: want 1 to %d", flow.BoundID(id), len(id), maxWorkflowIDBytes)
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.', c == ':':
		default:
			return fmt.Errorf("workflow id %q: want letters, digits, _, -, . or : only", flow.BoundID(id))
		}
	}
	return nil
}

// maxEventIDBytes bounds an event id: "ms-seq" (two 64-bit numbers),
// then ".place" for the second and later events of an entry.
const maxEventIDBytes = 20 + 1 + 20 + 1 + 9

// checkEventID refuses what is not an event id as the log writes them:
// the parts in canonical form (no sign, no leading zero; Redis refuses
// some forms that parse), a place under a billion. what names where it
// came from (Last-Event-ID, after).
func checkEventID(what, id string) error {
	bad := func() error {
		return fmt.Errorf("%s %q is not an event id (ms-seq or ms-seq.n, as the stream's id: lines give them)", what, flow.BoundID(id))
	}
	if len(id) > maxEventIDBytes {
		return bad()
	}
	entry, place, ok := record.SplitEventID(id)
	if !ok || place >= 1e9 {
		return bad()
	}
	ms, seq, _ := strings.Cut(entry, "-")
	for _, n := range []string{ms, seq} {
		v, err := strconv.ParseUint(n, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != n {
			return bad()
		}
	}
	return nil
}
