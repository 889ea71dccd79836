package tasks

// stepRun is one attempt of one step, as the handler passes it along
// (process → failed → deadLetter → settle): the task's payload, the spec,
// the step, its resolved settings and the attempt number Begin counted.
type stepRun struct {
	p       Payload
	spec    *Spec
	st      *Step
	r       resolved
	attempt int
}
