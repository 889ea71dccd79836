package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
)

func followCmd(c *common) *cobra.Command {
	var (
		asJSON    bool
		after     string
		reconnect time.Duration
	)
	cmd := &cobra.Command{
		Use:   "follow ID",
		Short: "Follow a workflow's events live: a line per step change and LLM call, streamed text as it comes",
		Long: `follow prints a workflow's event log (docs/events.md) from its start (or
after --after ID) and then each event as it happens: steps ready, started,
failed (with the class and when the next attempt is due), done, dead; every
LLM call (route, target, key fingerprint, latency, tokens); tool turns;
and streamed text. It prints through the workflow's end (workflow.ended:
completed, failed, canceled, timed out), or stops when the workflow is
blocked on a dead-lettered step that is not optional, and exits as --wait
does: 0 completed, 1 otherwise. While Redis (or the dashboard, with
--server) does not answer it reconnects, for up to --reconnect, and
resumes after the last event it printed (each event is printed once);
past --reconnect it exits 3. --json prints one JSON event a line.`,
		Example: "  enqueue follow wf_abc123\n  enqueue follow wf_abc123 --json | jq -r .type\n  enqueue follow wf_abc123 --reconnect 5m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reconnect < 0 {
				return usageErr("--reconnect: %s is negative (0: do not reconnect)", reconnect)
			}
			return withClient(cmd, c, func(cl *agentq.Client) error {
				if after != "" && !record.ValidEventID(after) {
					return usageErr("--after: %q is not an event id (ms-seq)", after)
				}
				return follow(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cl, args[0], after, asJSON, reconnect)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON event a line")
	cmd.Flags().StringVar(&after, "after", "", "start after this event id (the id of the last event seen)")
	reconnectFlag(cmd, &reconnect)
	return cmd
}

// reconnectFlag is --reconnect, of follow and of a submit's --follow.
func reconnectFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "reconnect", time.Minute, "with --follow (and follow), reconnect through Redis (or the dashboard) not answering for this long, resuming after the last event printed, then exit 3 (0: do not reconnect)")
}

// errEndedEarly is an event stream that ended before the workflow did: a
// reader reconnects, as after a dropped connection.
var errEndedEarly = errors.New("the event stream ended before workflow.ended")

// follow prints a workflow's events until it is over: through its
// workflow.ended event, or up to the dead-lettered step it is blocked on
// (as Wait decides). Then it returns the exit --wait would. While Redis
// (or the dashboard) does not answer it reconnects, for at most reconnect
// in one stretch, resuming after the last event it printed, and says so
// on errW.
func follow(ctx context.Context, w, errW io.Writer, cl *agentq.Client, id, after string, asJSON bool, reconnect time.Duration) error {
	f := &follower{cl: cl, id: id, p: &eventPrinter{w: w, json: asJSON}, errW: errW, o: outage{limit: max(reconnect, 0)}, gen: -1, last: after}
	for {
		printed := f.printed
		wf, err := f.read(ctx)
		if err == nil {
			return f.end(wf)
		}
		f.p.endLine()
		switch {
		case ctx.Err() != nil:
			return notFound(err, id)
		case errors.Is(err, errEndedEarly) && f.printed > printed:
			continue // the log went on after an end (a rerun): read on
		case errors.Is(err, errEndedEarly) || unanswered(err):
			if err := f.ride(ctx, err); err != nil {
				return err
			}
		default:
			return notFound(err, id)
		}
	}
}

// follower is one follow's place in a workflow's event log.
type follower struct {
	cl   *agentq.Client
	id   string
	p    *eventPrinter
	errW io.Writer
	o    outage

	gen      int    // the run the events read are of (-1: not known yet, from a resumed read)
	last     string // the id of the last event printed ("": none; or --after)
	lastType string // the type of the last event printed
	printed  int    // events printed
	// truncAt is f.last when a log.truncated (which has no id) was printed
	truncAt    string
	truncSaid  bool
	dead       *record.Event // a step.dead whose verdict an outage interrupted
	wspec      *spec.Spec    // read at the first step.dead of a blocked workflow
	wspecTried bool
}

// read prints the events after f.last until the workflow is over, and
// returns its record then; otherwise why it stopped: a read that was not
// answered, errEndedEarly, or another error.
func (f *follower) read(ctx context.Context) (*agentq.Workflow, error) {
	if f.dead != nil {
		if wf, err := f.blockedOn(ctx, *f.dead); err != nil || wf != nil {
			return wf, err
		}
		f.dead = nil
	}
	for e, err := range f.cl.Events(ctx, f.id, f.last) {
		if err != nil {
			return nil, err
		}
		f.answered()
		if f.seen(e) {
			continue
		}
		if err := f.p.print(e); err != nil {
			return nil, err
		}
		f.note(e)
		if e.Type == record.EventDead {
			f.dead = &e
			if wf, err := f.blockedOn(ctx, e); err != nil || wf != nil {
				return wf, err
			}
			f.dead = nil
		}
	}
	// the stream ended: after workflow.ended, or the workflow has no log
	// (events off) and its record says it is over
	wf, err := f.cl.Status(ctx, f.id)
	if err != nil {
		return nil, err
	}
	if record.Terminal(wf.State) {
		return wf, nil
	}
	return nil, errEndedEarly
}

// seen reports an event printed before a reconnect: the log's come after
// f.last; a log.truncated (it has no id) is printed once at a place.
func (f *follower) seen(e record.Event) bool {
	if e.ID == "" {
		return e.Type == record.EventTruncated && f.truncSaid && f.truncAt == f.last
	}
	return f.last != "" && !record.EventIDBefore(f.last, e.ID)
}

// note records e, printed.
func (f *follower) note(e record.Event) {
	f.printed++
	f.lastType = e.Type
	switch {
	case e.ID != "":
		f.last = e.ID
	case e.Type == record.EventTruncated:
		f.truncAt, f.truncSaid = f.last, true
	}
	switch e.Type {
	case record.EventSubmitted:
		f.gen = 0
	case record.EventRerun:
		f.gen = e.Gen
	}
}

// blockedOn returns the workflow's record if it is blocked on the dead
// step e (as --wait stops there, so does follow): the workflow is blocked
// in the run being read, the step is still dead, and it is not optional
// (an optional step or map instance that is dead blocks nothing). A
// workflow that ended, or goes on, is read on: through workflow.ended.
func (f *follower) blockedOn(ctx context.Context, e record.Event) (*agentq.Workflow, error) {
	wf, err := f.cl.Status(ctx, f.id)
	if err != nil {
		return nil, err
	}
	if wf.State != record.StateBlocked || f.gen >= 0 && wf.Generation != f.gen {
		return nil, nil
	}
	for _, s := range wf.Steps {
		if s.ID == e.Step && s.State != record.StepDead {
			return nil, nil // requeued since: another step blocks it
		}
	}
	if !f.wspecTried {
		s, err := f.cl.Spec(ctx, f.id)
		if err != nil && unanswered(err) {
			return nil, err
		}
		f.wspec, f.wspecTried = s, true // without it, every dead step blocks
	}
	if f.wspec != nil {
		step, _, _ := strings.Cut(e.Step, "[") // a map instance is as optional as its map
		if st, ok := f.wspec.Step(step); ok && st.Optional {
			return nil, nil
		}
	}
	return wf, nil
}

// end prints the state the workflow is over in, unless its
// workflow.ended said it, and returns the exit --wait would.
func (f *follower) end(wf *agentq.Workflow) error {
	f.p.endLine()
	if !f.p.json && f.lastType != record.EventEnded {
		fmt.Fprintf(f.p.w, "workflow %s is %s\n", f.id, wf.State)
	}
	return endState(wf)
}

// ride waits out an outage that stopped the read with err: it says so
// once, then tries again every waitPoll until Redis (or the dashboard)
// answers, for at most the --reconnect limit; past it, it returns the
// error to exit with (3).
func (f *follower) ride(ctx context.Context, err error) error {
	for {
		began, over := f.o.failed()
		switch {
		case f.o.limit == 0:
			return f.gaveUp(err, "not reconnecting (--reconnect 0)")
		case began:
			fmt.Fprintf(f.errW, "workflow %s: cannot read its events (%s); reconnecting for up to %s (--reconnect)\n", f.id, oneLine(err.Error(), 300), f.o.limit)
		case over:
			return f.gaveUp(err, fmt.Sprintf("no answer for %s (--reconnect)", f.o.limit))
		}
		if perr := f.o.pause(ctx); perr != nil {
			return perr
		}
		if errors.Is(err, errEndedEarly) {
			return nil // the server answers: its events say when the stream is back
		}
		if _, err = f.cl.Status(ctx, f.id); err == nil {
			f.answered()
			return nil
		}
		if !unanswered(err) || ctx.Err() != nil {
			return notFound(err, f.id)
		}
	}
}

// answered ends an outage, saying so.
func (f *follower) answered() {
	if !f.o.answered() {
		return
	}
	from := "from the start"
	if f.last != "" {
		from = "after event " + f.last
	}
	fmt.Fprintf(f.errW, "workflow %s: reconnected; resuming %s\n", f.id, from)
}

func (f *follower) gaveUp(err error, why string) error {
	resume := "enqueue follow " + f.id
	if f.last != "" {
		resume += " --after " + f.last
	}
	return &ExitError{Code: ExitUnreachable, Err: fmt.Errorf("workflow %s: stopped following: %s; the workflow goes on (resume with '%s'): %w", f.id, why, resume, err)}
}
