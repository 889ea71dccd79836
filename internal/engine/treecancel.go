package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// A cancel (or a discarded dead letter that fails a workflow) hands the
// workflows under it to a tasks.TypeCancelTree task (flow.CancelTreeTask):
// the workflow is canceled if it still runs (the cancel enqueued the task
// before it marked it: a crash between the two is made good here), then
// every workflow under it in its tree (store.Tree) that still runs, a few
// at a time. A run cut short (a crash, a redelivery) is retried and walks
// again: what it canceled already is skipped. A child created while the
// walk runs is caught by the walk's next look at the tree, or by the step
// that created it (startChild: its parent ended, the child goes too); in a
// tree whose root is canceled no child is created at all
// (store.ReserveChild refuses).

// cancelTreeWorkers is how many workflows a tree cancel ends at once.
const cancelTreeWorkers = 8

// cancelTree runs a tasks.TypeCancelTree task.
func (h *Handler) cancelTree(ctx context.Context, t *asynq.Task) error {
	p, err := tasks.DecodePayload(t.Payload())
	if err != nil {
		return fmt.Errorf("%v: %w", err, asynq.SkipRetry)
	}
	w, err := h.st.Summary(ctx, p.Workflow)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rerun := w.Generation != p.Gen // rerun since the cancel: the new run, and its children, go on
	if !rerun {
		if _, err := h.cancelWorkflow(ctx, p.Workflow, deliveryOf(ctx).taskID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	root, err := h.st.RootOf(ctx, p.Workflow, flow.MaxChildDepth)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	canceled := 0
	for {
		tree, err := h.st.TreeOf(ctx, root)
		if err != nil {
			return err
		}
		var next []string
		under := tree.Under(p.Workflow)
		if rerun {
			if under, err = h.startedBefore(ctx, tree, p.Workflow, p.Gen, under); err != nil {
				return err
			}
		}
		for _, wf := range under {
			if !seen[wf] {
				seen[wf] = true
				next = append(next, wf)
			}
		}
		if len(next) == 0 {
			break
		}
		n, err := h.cancelAll(ctx, next)
		canceled += n
		if err != nil {
			return err
		}
	}
	if len(seen) == 0 && !rerun {
		// a tree written before trees were recorded: its children, by their
		// parents' records
		n, err := h.cancelChildrenOf(ctx, p.Workflow, 0)
		canceled += n
		if err != nil {
			return err
		}
	}
	if canceled > 0 {
		h.o.Logger.Info("workflows under a canceled workflow canceled", "wf", p.Workflow, "root", root, "canceled", canceled, "tree", len(seen)+1)
	}
	return nil
}

// startedBefore keeps of under (wf's descendants in tree, parents first)
// those under a child wf started in run gen or before it.
func (h *Handler) startedBefore(ctx context.Context, tree *store.Tree, wf string, gen int, under []string) ([]string, error) {
	keep := map[string]bool{}
	var out []string
	for _, d := range under {
		if parent := tree.Parent[d]; parent != wf {
			keep[d] = keep[parent]
		} else if l, err := h.st.ParentOf(ctx, d); err != nil {
			return nil, err
		} else {
			keep[d] = l != nil && l.Gen <= gen
		}
		if keep[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

// cancelAll cancels the workflows ids that still run, a few at a time,
// and reports how many it canceled.
func (h *Handler) cancelAll(ctx context.Context, ids []string) (int, error) {
	var (
		mu    sync.Mutex
		n     int
		errs  []error
		wg    sync.WaitGroup
		queue = make(chan string)
	)
	for range min(cancelTreeWorkers, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wf := range queue {
				ended, err := h.cancelWorkflow(ctx, wf, "")
				mu.Lock()
				if ended {
					n++
				}
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					errs = append(errs, fmt.Errorf("workflow %s: %w", wf, err))
				}
				mu.Unlock()
			}
		}()
	}
	for _, wf := range ids {
		queue <- wf
	}
	close(queue)
	wg.Wait()
	return n, errors.Join(errs...)
}

// cancelChildrenOf cancels the children workflow wf's steps started last,
// and theirs, walking the parents' records (those that ended are not
// walked: their children were seen to when they ended).
func (h *Handler) cancelChildrenOf(ctx context.Context, wf string, depth int) (int, error) {
	if depth >= flow.MaxChildDepth {
		return 0, nil
	}
	children, err := h.st.Children(ctx, wf)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range children {
		ended, err := h.cancelWorkflow(ctx, c, "")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if ended {
			n++
			m, err := h.cancelChildrenOf(ctx, c, depth+1)
			n += m
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// cancelWorkflow cancels workflow wf if it still runs: marked canceled,
// its tasks (but skip) stopped, its webhook and its parent step told. It
// reports whether this call ended it; one that ended already is left as
// it is.
func (h *Handler) cancelWorkflow(ctx context.Context, wf, skip string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err // the worker stops: the task comes back and walks again
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if w, err := h.st.Summary(ctx, wf); err != nil {
		return false, err
	} else if record.Terminal(w.State) {
		return false, nil
	}
	wspec, err := h.specs.get(ctx, h.st, wf)
	if err != nil {
		return false, err
	}
	state, err := h.st.Cancel(ctx, wf, ids(wspec))
	if err, _ = store.Unconfirmed(err); err != nil { // not confirmed: canceled on the primary all the same
		return false, err
	}
	if state != store.StateCanceled {
		return false, nil
	}
	insp := asynq.NewInspectorFromRedisClient(h.o.Redis)
	if errs := flow.StopTasks(insp, flow.TasksOf(ctx, h.st, wf, wspec), skip); len(errs) > 0 {
		h.o.Logger.Warn("some tasks of a canceled workflow could not be stopped (they stop at their next start)", "wf", wf, "err", errors.Join(errs...))
	}
	h.notifyEnded(ctx, wf, wspec, store.StateCanceled)
	return true, nil
}
