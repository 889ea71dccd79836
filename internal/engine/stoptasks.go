package engine

import (
	"context"

	"github.com/agentq/agentq/internal/store"
)

// workflowStopped reports whether a step whose context was canceled was
// stopped by its workflow's cancel or deadline (then the attempt ends
// there), not by the worker shutting down (then it comes back). It reads
// the workflow's state with a context of its own: the step's is done.
func (h *Handler) workflowStopped(ctx context.Context, wf string) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	w, err := h.st.Summary(rctx, wf)
	return err == nil && (w.State == store.StateCanceled || w.State == store.StateTimedOut)
}
