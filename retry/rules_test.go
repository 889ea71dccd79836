package retry

import "testing"

// Every class has its row in the table, and the rows keep the invariants
// the policies rely on.
func TestEveryClassHasARule(t *testing.T) {
	all := []Class{OK, Network, Timeout, Server, RateLimited, Quota, Auth, BadRequest, ContextLength, ContentFilter, NotFound, Canceled, InvalidOutput, OutputTooLarge, Handler, BudgetExceeded}
	if len(all) != len(rules) {
		t.Fatalf("%d classes, %d rules", len(all), len(rules))
	}
	for _, c := range all {
		r, ok := rules[c]
		if !ok {
			t.Errorf("%s has no rule", c)
		}
		if r.RequestFault && (r.Retryable || r.ProviderFault) {
			t.Errorf("%s: a request's own fault is neither retryable nor the provider's", c)
		}
		if r.ProviderFault && (r.Answered || !r.LowersHealth) {
			t.Errorf("%s: a provider fault did not answer and lowers health", c)
		}
	}
	if !Class("busy").Retryable() || Class("busy").ProviderFault() {
		t.Error("an unknown class is retryable and nobody's fault")
	}
}
