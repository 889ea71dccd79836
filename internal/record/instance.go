package record

import "strconv"

// InstanceID is the step id of a map's n-th instance.
func InstanceID(step string, n int) string { return step + "[" + strconv.Itoa(n) + "]" }
