package validate

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// BenchmarkOrdersCheck checks a three-claim answer of the orders pack against
// three order records: the rules of a declared kind on cel-go programs.
func BenchmarkOrdersCheck(b *testing.B) {
	reg, err := knowledge.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	p := reg.Pack("orders")
	c, err := NewChecker(p, Config{})
	if err != nil {
		b.Fatal(err)
	}
	x, err := facts.NewExtractor(p.Facts)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("../../knowledge/packs/orders/cases/orders.json")
	if err != nil {
		b.Fatal(err)
	}
	ix, _ := x.ExtractFile(string(raw))
	answer := "Orders.\n\n[machine-readable claims]\n```json\n{\"orderClaims\": [\n" +
		`{"order": "A-1001", "claim": "Order A-1001 was delivered on 2026-03-03", "status": "delivered", "date": "2026-03-03", "evidenceLevel": "confirmed", "evidence": ["order|A-1001|status"]},` +
		`{"order": "A-1002", "claim": "Order A-1002 totals 120", "amount": 120, "evidenceLevel": "confirmed", "evidence": ["order|A-1002|total"]},` +
		`{"order": "A-1003", "claim": "Order A-1003 was refunded 35.50", "status": "refunded", "refund": 35.5, "evidenceLevel": "confirmed", "evidence": ["order|A-1003|refunded"]}` +
		"\n]}\n```\n"
	in := Input{Index: ix, Set: p.Set("orders")}
	if got := c.Check(answer, in); len(got) != 1 || got[0].Code != "order.status_mismatch" {
		b.Fatalf("issues %+v, want one status_mismatch", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.Check(answer, in)
	}
}

// TestDeclaredKindsAfterPlanning: a second checker of a pack whose rules the
// engine planned already (and whose checked ASTs it released), and many checks
// at once (instances built on demand), check a declared kind alike.
func TestDeclaredKindsAfterPlanning(t *testing.T) {
	t.Parallel()
	packs, err := knowledge.BuiltinPacks()
	if err != nil {
		t.Fatal(err)
	}
	var p *knowledge.Pack
	for _, q := range packs {
		if q.Name == "orders" {
			p = q
		}
	}
	x, err := facts.NewExtractor(p.Facts)
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := x.ExtractFile(`{"orders": [{"id": "A-1", "status": "shipped"}]}`)
	answer := "A-1 arrived.\n\n[machine-readable claims]\n```json\n" +
		`{"orderClaims": [{"order": "A-1", "claim": "Order A-1 was delivered", "status": "delivered", "evidenceLevel": "confirmed", "evidence": ["order|A-1|status"]}]}` + "\n```\n"
	for round := range 2 {
		c, err := NewChecker(p, Config{})
		if err != nil {
			t.Fatalf("checker %d: %v", round, err)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := c.Check(answer, Input{Index: ix})
				if len(got) != 1 || got[0].Code != "order.status_mismatch" || got[0].Args["actual"] != "shipped" {
					errs <- fmt.Sprintf("checker %d: %+v", round, got)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}
