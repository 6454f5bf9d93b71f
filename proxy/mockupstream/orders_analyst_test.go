package mockupstream

import (
	"fmt"
	"strings"
	"testing"
)

const testOrders = `{"orders": [
 {"id": "A-1001", "status": "shipped", "total": 59.90, "currency": "EUR", "placed": "2026-03-01", "shipped": "2026-03-03"},
 {"id": "A-1002", "status": "delivered", "total": 120.00, "currency": "EUR", "placed": "2026-02-10", "shipped": "2026-02-11", "delivered": "2026-02-14"},
 {"id": "A-1003", "status": "refunded", "total": 35.50, "currency": "EUR", "placed": "2026-01-20", "refunded": 35.50},
 {"id": "A-1004", "status": "pending", "total": 12.00, "currency": "EUR", "placed": "2026-03-05"}
]}`

func ordersRequest(n int) []Message {
	return []Message{
		{Role: "system", Text: fmt.Sprintf("You are a support assistant. #case %d", n)},
		{Role: "user", Text: "Where are my orders?"},
		{Role: "assistant", Text: ""},
		{Role: "tool", Text: testOrders},
	}
}

func TestOrdersAnalystTellsTheTruthAtErrorRateZero(t *testing.T) {
	t.Parallel()
	a := &OrdersAnalyst{Seed: 3}
	for n := range 30 {
		msgs := ordersRequest(n)
		content := a.Answer(Request{Messages: msgs}).Content
		truth, ok := a.TrueStatements(msgs, content)
		if !ok || len(truth) < 2 {
			t.Fatalf("case %d: cannot read its answer:\n%s", n, content)
		}
		for path, ok := range truth {
			if !ok {
				t.Errorf("case %d: %s is false:\n%s", n, path, content)
			}
		}
		if again := a.Answer(Request{Messages: msgs}).Content; again != content {
			t.Fatalf("case %d: a second answer differs", n)
		}
	}
}

func TestOrdersAnalystErrsAndFixesWhatTheRevisionNames(t *testing.T) {
	t.Parallel()
	a := &OrdersAnalyst{Seed: 3, ErrorRate: 1, FixRate: 1}
	for n := range 20 {
		msgs := ordersRequest(n)
		draft := a.Answer(Request{Messages: msgs}).Content
		truth, _ := a.TrueStatements(msgs, draft)
		wrong := 0
		for _, ok := range truth {
			if !ok {
				wrong++
			}
		}
		// Evidence-only errors (unsupported) keep the statement true.
		if wrong == 0 && !strings.Contains(draft, `"evidence":[]`) {
			t.Fatalf("case %d: every claim of a draft at error rate 1 is true:\n%s", n, draft)
		}
		// A revision request naming every order fixes every claim.
		turn := "Fix: A-1001 A-1002 A-1003 A-1004"
		rev := append(append([]Message{}, msgs...), Message{Role: "assistant", Text: draft}, Message{Role: "user", Text: turn})
		fixed := a.Answer(Request{Messages: rev}).Content
		truth, ok := a.TrueStatements(msgs, fixed)
		if !ok {
			t.Fatalf("case %d: the revision has no claims:\n%s", n, fixed)
		}
		for path, ok := range truth {
			if !ok {
				t.Errorf("case %d: %s still false after a revision naming it:\n%s", n, path, fixed)
			}
		}
		if strings.Contains(fixed, `"evidence":[]`) {
			t.Errorf("case %d: an unsupported claim was not fixed:\n%s", n, fixed)
		}
	}
	if got := (&OrdersAnalyst{}).Answer(Request{Messages: []Message{{Role: "user", Text: "hi"}}}).Content; strings.Contains(got, OrdersMarker) {
		t.Errorf("no orders, but claims: %s", got)
	}
}
