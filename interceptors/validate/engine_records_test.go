package validate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// BenchmarkOrdersCheck checks a three-claim answer of the orders pack against
// three order records: the rules of a declared kind on the planned engine.
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

// TestDeclaredKindsBindEveryFunction: a rule of a declared kind runs on the
// engine with every rule function bound — the operation-log and knowledge
// functions as well as the records' — so a call is a value, not rule.error.
func TestDeclaredKindsBindEveryFunction(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "orders")
	if err := os.CopyFS(dir, os.DirFS("../../knowledge/packs/orders")); err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules = append(rules, []byte(`
  - id: order.bound_functions
    kind: orderClaims
    severity: Info
    notice: weak
    let:
      rec: 'record("orders", claim.order)'
    when: >-
      rec != null && first_production("nobody", "nothing") == null && !is_player("nobody") &&
      !knows_scope("no-such-scope") && size(assets_with_tag("no-such-scope", "t")) == 0 &&
      size(records("orders").filter(r, r.id == claim.order)) == 1 && rec.total + 0.5 > 1.0
    message: 'bound {{.Args.order}}'
    args: {order: 'claim.order', total: 'rec.total', placed: 'rec.placed'}
`)...)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := knowledge.LoadPackDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewChecker(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := facts.NewExtractor(p.Facts)
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := x.ExtractFile(`{"orders": [{"id": "A-1", "status": "shipped", "total": 12.5, "placed": "2026-03-01"}]}`)
	answer := "A-1 shipped.\n\n[machine-readable claims]\n```json\n" +
		`{"orderClaims": [{"order": "A-1", "claim": "Order A-1 has shipped", "status": "shipped", "evidenceLevel": "confirmed", "evidence": ["order|A-1|status"]}]}` + "\n```\n"
	got := c.Check(answer, Input{Index: ix})
	var codes []string
	for _, is := range got {
		codes = append(codes, is.Code)
		if is.Code == "order.bound_functions" && (is.Args["total"] != "12.50" || is.Args["placed"] != "2026-03-01") {
			t.Errorf("args %v, want total 12.50 and placed 2026-03-01", is.Args)
		}
	}
	if len(got) != 1 || got[0].Code != "order.bound_functions" {
		t.Fatalf("issues %v (%+v), want only order.bound_functions", codes, got)
	}
}

// TestOrdersPlannedMatchPrograms: the orders pack's rules give the same issues
// planned (maps, doubles and timestamps from the records through the planner's
// operators) as with every expression run as a cel-go program, on random
// answers over the pack's example records.
func TestOrdersPlannedMatchPrograms(t *testing.T) {
	t.Parallel()
	fresh := func() *knowledge.Pack {
		packs, err := knowledge.BuiltinPacks() // fresh copies: their expressions are not yet planned
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range packs {
			if p.Name == "orders" {
				return p
			}
		}
		t.Fatal("no orders pack")
		return nil
	}
	pack := fresh()
	core, err := planCore(pack, false)
	if err != nil {
		t.Fatal(err)
	}
	programs, err := NewChecker(fresh(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	programs.rules = &engine{engineCore: core}
	planned, err := NewChecker(fresh(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if planned.rules.planned == 0 {
		t.Fatal("nothing planned")
	}
	x, err := facts.NewExtractor(pack.Facts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../knowledge/packs/orders/cases/orders.json")
	if err != nil {
		t.Fatal(err)
	}
	ix, _ := x.ExtractFile(string(raw))
	in := Input{Index: ix}
	rng := rand.New(rand.NewPCG(7, 30))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	claim := func() string {
		id := pick("A-1001", "A-1002", "A-1003", "A-9999")
		fields := []string{`"order": "` + id + `"`, `"claim": "about ` + id + `"`}
		if rng.IntN(2) == 0 {
			fields = append(fields, `"status": "`+pick("shipped", "delivered", "refunded", "lost", "pending")+`"`)
		}
		if rng.IntN(2) == 0 {
			fields = append(fields, `"amount": `+pick("59.9", "120", "120.004", "35.5", "10", `"12"`))
		}
		if rng.IntN(2) == 0 {
			fields = append(fields, `"date": "`+pick("2026-03-03", "2026-02-14", "2026-01-01", "2026-02-11", "2026-03-03T10:00:00Z")+`"`)
		}
		if rng.IntN(3) == 0 {
			fields = append(fields, `"refund": `+pick("35.5", "20", "0", "120"))
		}
		if rng.IntN(4) != 0 {
			fields = append(fields, `"evidenceLevel": "`+pick("confirmed", "highly likely", "possible", "uncertain", "sure")+`"`)
		}
		if rng.IntN(3) != 0 {
			fields = append(fields, `"evidence": ["`+pick("order|"+id+"|status", "order|A-1002|total", "order|"+id+"|refunded", "order|"+id+"|delivered", "note")+`"]`)
		}
		return "{" + strings.Join(fields, ", ") + "}"
	}
	codes := map[string]bool{}
	for i := range 400 {
		var cs []string
		for range 1 + rng.IntN(4) {
			cs = append(cs, claim())
		}
		a := "Orders.\n\n[machine-readable claims]\n```json\n{\"orderClaims\": [" + strings.Join(cs, ",") + "]}\n```\n"
		got := planned.Check(a, in)
		for _, is := range got {
			codes[is.Code] = true
		}
		sameIssues(t, fmt.Sprintf("answer %d", i), a, got, programs.Check(a, in))
	}
	if len(codes) < 10 || codes[CodeRuleError] {
		t.Errorf("the random answers gave the codes %v: want at least 10, and no rule.error", codes)
	}
}
