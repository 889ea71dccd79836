package spec

import (
	"strings"
	"time"
)

// A wait's timeout (wait_for.timeout, approve.timeout) and a workflow's
// deadline are each at least 1s and at most limits.max_wait: given as 0s
// it is refused (left out, a wait takes its default and a workflow has no
// deadline), and a default over limits.max_wait must be set.

// checkWait checks the wait whose timeout d is at where: given says the
// spec holds its key (0s written out), dflt is what a missing one means
// (0: no bound at all, as a workflow without a deadline).
func checkWait(d Duration, given bool, dflt time.Duration, lim Limits, line int, where string, bad ProblemFunc) {
	t := time.Duration(d)
	unset := "leave it out for the default (" + ShowDuration(dflt) + ")"
	if dflt == 0 {
		unset = "leave it out for none"
	}
	switch {
	case t == 0 && given:
		bad(line, where, "0s is not a wait: give one of 1s to %s, or %s", maxWaitName(lim), unset)
	case t == 0 && dflt > 0 && lim.MaxWait > 0 && dflt > lim.MaxWait:
		bad(line, where, "is unset and its default %s is over limits.max_wait (%s): set it", ShowDuration(dflt), ShowDuration(lim.MaxWait))
	case t == 0:
	case t < time.Second:
		bad(line, where, "%s is under 1s", t)
	case lim.MaxWait > 0 && t > lim.MaxWait:
		bad(line, where, "%s is over limits.max_wait (%s)", ShowDuration(t), ShowDuration(lim.MaxWait))
	}
}

// maxWaitName is the upper bound of a wait, for a problem.
func maxWaitName(lim Limits) string {
	if lim.MaxWait > 0 {
		return "limits.max_wait (" + ShowDuration(lim.MaxWait) + ")"
	}
	return "limits.max_wait"
}

// ShowDuration writes d as a person would: 168h, 1h30m, 90s (not
// 168h0m0s).
func ShowDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// hasKey says whether the spec's source holds key of step st's block
// (wait_for.timeout): the key written out, whatever its value.
func (st *Step) hasKey(block, key string) bool {
	return st.fieldLines[block+"."+key] > 0
}
