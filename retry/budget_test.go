package retry

import "testing"

// A refused budget is nobody's failure and not retried within its period:
// no breaker, no health score, no request fault (the route moves on to a
// target under another budget), no backoff.
func TestBudgetExceededIsALimitNotAFailure(t *testing.T) {
	r := BudgetExceeded.Rule()
	if r != (Rule{}) {
		t.Fatalf("budget_exceeded rule = %+v, want neither retryable nor anybody's fault", r)
	}
	if BudgetExceeded.Retryable() || BudgetExceeded.ProviderFault() || BudgetExceeded.RequestFault() {
		t.Fatal("budget_exceeded is retried or blamed on someone")
	}
}
