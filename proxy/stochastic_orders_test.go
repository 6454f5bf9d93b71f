package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// ordersRouteConfig is the orders pack's route (configs/orders.yaml) with the
// claims block kept, so what the client receives can be validated again.
const ordersRouteConfig = `
server:
  keepalive_interval: 150ms
log: {level: warn}
upstreams:
  mock: {base_url: "%MOCK%", read_timeout: 5s}
routes:
  - name: support
    models: [support]
    upstream: mock
    upstream_model: deepseek-chat
    pack: orders
    inject: {}
    validate: {strip_claims: never}
    revise: {}
`

// stochasticOrders is the customer's orders every request of the measurement
// carries, in a tool result.
const stochasticOrders = `{"customer": "C-2291", "orders": [
 {"id": "A-1001", "status": "shipped", "total": 59.90, "currency": "EUR", "placed": "2026-03-01", "shipped": "2026-03-03"},
 {"id": "A-1002", "status": "delivered", "total": 120.00, "currency": "EUR", "placed": "2026-02-10", "shipped": "2026-02-11", "delivered": "2026-02-14"},
 {"id": "A-1003", "status": "refunded", "total": 35.50, "currency": "EUR", "placed": "2026-01-20", "shipped": "2026-01-21", "delivered": "2026-01-24", "refunded": 35.50},
 {"id": "A-1004", "status": "pending", "total": 12.00, "currency": "EUR", "placed": "2026-03-05"},
 {"id": "A-1005", "status": "cancelled", "total": 80.00, "currency": "EUR", "placed": "2026-02-27"}
]}`

// ordersRun is what one request of the measurement gave.
type ordersRun struct {
	draftC, deliveredC, revisions int
	outcome                       string
	falseDraft, falseDelivered    bool // the prose states a statement the records contradict
	notice                        bool
}

// TestStochasticOrdersAnalystThroughTheProxy measures the orders pack's hidden
// revision on the mock's stochastic support assistant (docs/revision.md, "The
// orders pack"): drafts with a Contradiction, what the client receives
// validated again, the outcomes, and whether the prose still states something
// the records contradict. The answers are a function of the seed, so every run
// prints the same table:
//
//	go test ./proxy -run StochasticOrders -v
func TestStochasticOrdersAnalystThroughTheProxy(t *testing.T) {
	t.Parallel()
	const seed, perConfig = 13, 40
	configs := []struct{ errorRate, fixRate float64 }{
		{0, 0}, {0.15, 0.8}, {0.15, 0.5}, {0.15, 0}, {0.35, 0.8}, {0.35, 0.5}, {0.35, 0},
	}
	reg, err := knowledge.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	off, err := validate.NewOffline(reg.Packs(), reg.Set, validate.OfflineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	results := make([][]ordersRun, len(configs))
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, c := range configs {
		results[i] = make([]ordersRun, perConfig)
		h := newHarness(t, "", ordersRouteConfig)
		analyst := &mockupstream.OrdersAnalyst{Seed: seed, ErrorRate: c.errorRate, FixRate: c.fixRate}
		if err := h.mock.SetScript(&mockupstream.Script{Rules: []mockupstream.Rule{analyst.Rule()}}); err != nil {
			t.Fatal(err)
		}
		for n := range perConfig {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				r, err := ordersRequest(h, analyst, off, n)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures = append(failures, fmt.Sprintf("error %.2f fix %.2f case %d: %v", c.errorRate, c.fixRate, n, err))
					return
				}
				results[i][n] = r
			}()
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed: %s", len(failures), strings.Join(failures, "; "))
	}
	t.Logf("%d requests per row, seed %d; C = Contradiction:", perConfig, seed)
	t.Logf("| error / fix rate | drafts with ≥1 C | revised | delivered with ≥1 C | draft prose states a false statement | delivered prose states one | …of those, named in the notice | accepted / resolved / improved / downgraded |")
	t.Logf("|---|---|---|---|---|---|---|---|")
	pct := func(n int) string { return fmt.Sprintf("%d%% (%d)", (n*100+perConfig/2)/perConfig, n) }
	for i, c := range configs {
		var draftC, revised, deliveredC, falseDraft, falseDelivered, noticed int
		outcomes := map[string]int{}
		for n, r := range results[i] {
			if r.draftC > 0 {
				draftC++
			}
			if r.revisions > 0 {
				revised++
			}
			if r.deliveredC > 0 {
				deliveredC++
			}
			if r.falseDraft {
				falseDraft++
			}
			if r.falseDelivered {
				falseDelivered++
				if r.notice {
					noticed++
				}
			}
			outcomes[r.outcome]++
			if c.errorRate == 0 && (r.draftC > 0 || r.falseDraft || r.revisions > 0) {
				t.Errorf("case %d at error rate 0: the model's true claims were flagged (draft C %d, revisions %d)", n, r.draftC, r.revisions)
			}
			if r.deliveredC > 0 {
				t.Errorf("error %.2f fix %.2f case %d: the claims delivered have %d Contradictions (the downgrade leaves none)", c.errorRate, c.fixRate, n, r.deliveredC)
			}
			if r.falseDelivered && !r.notice {
				t.Errorf("error %.2f fix %.2f case %d: the prose delivered states something the records contradict, and no notice says so", c.errorRate, c.fixRate, n)
			}
		}
		t.Logf("| %.2f / %.1f | %s | %s | %s | %s | %s | %d of %d | %d / %d / %d / %d |", c.errorRate, c.fixRate, pct(draftC), pct(revised), pct(deliveredC),
			pct(falseDraft), pct(falseDelivered), noticed, falseDelivered,
			outcomes["accepted"], outcomes["resolved"], outcomes["improved"], outcomes["downgraded"])
	}
}

// ordersRequest sends case n through the orders route and reads what happened.
func ordersRequest(h *harness, analyst *mockupstream.OrdersAnalyst, off *validate.Offline, n int) (ordersRun, error) {
	var r ordersRun
	msgs := []map[string]any{
		{"role": "system", "content": fmt.Sprintf("You are the support assistant of Northwind Outfitters. #case %d", n)},
		{"role": "user", "content": "Hi, where are my orders?"},
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "get_orders", "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "c1", "content": stochasticOrders},
	}
	body, _ := json.Marshal(map[string]any{"model": "support", "messages": msgs})
	status, hdr, resp, err := h.tryPost("/v1/chat/completions", string(body))
	if err != nil {
		return r, err
	}
	if status != 200 {
		return r, fmt.Errorf("status %d: %s", status, resp)
	}
	content := gjson.GetBytes(resp, "choices.0.message.content").Str
	tresp, err := h.getTrace(hdr.Get("X-Factgate-Trace-Id"))
	if err != nil {
		return r, err
	}
	tb, err := io.ReadAll(tresp.Body)
	tresp.Body.Close()
	if err != nil || tresp.StatusCode != 200 {
		return r, fmt.Errorf("trace: %d %v %s", tresp.StatusCode, err, tb)
	}
	tr := gjson.ParseBytes(tb)
	r.outcome = tr.Get("final.outcome").Str
	r.notice = tr.Get("notice.text").Str != ""
	attempts := tr.Get("attempts").Array()
	if len(attempts) == 0 {
		return r, fmt.Errorf("no attempt: %s", tb)
	}
	r.revisions = len(attempts) - 1
	var draft []interceptors.Issue
	_ = json.Unmarshal([]byte(attempts[0].Get("issues").Raw), &draft)
	r.draftC = interceptors.CountSeverities(draft)[interceptors.Contradiction]
	rep, err := off.Check(validate.CheckRequest{Pack: "orders", Facts: []string{stochasticOrders}, Answer: content})
	if err != nil {
		return r, err
	}
	r.deliveredC = interceptors.CountSeverities(rep.Issues)[interceptors.Contradiction]
	mmsgs := []mockupstream.Message{{Role: "tool", Text: stochasticOrders}}
	isFalse := func(answer string) (bool, error) {
		truth, ok := analyst.TrueStatements(mmsgs, answer)
		if !ok {
			return false, fmt.Errorf("the analyst cannot read its answer:\n%s", answer)
		}
		for _, t := range truth {
			if !t {
				return true, nil
			}
		}
		return false, nil
	}
	if r.falseDraft, err = isFalse(attempts[0].Get("content").Str); err != nil {
		return r, err
	}
	final := attempts[tr.Get("final.attempt").Int()].Get("content").Str
	if r.falseDelivered, err = isFalse(final); err != nil {
		return r, err
	}
	return r, nil
}

// TestOrdersFromAResponsesFunctionCallOutput: the orders a Responses request
// carries in a function_call_output item are the records its answer is checked
// against; a contradicted draft is revised before the client sees it.
func TestOrdersFromAResponsesFunctionCallOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", ordersRouteConfig)
	analyst := &mockupstream.OrdersAnalyst{Seed: 13, ErrorRate: 1, FixRate: 1}
	if err := h.mock.SetScript(&mockupstream.Script{Rules: []mockupstream.Rule{analyst.Rule()}}); err != nil {
		t.Fatal(err)
	}
	output, _ := json.Marshal(stochasticOrders)
	body := `{"model": "support", "instructions": "You are a support assistant. #case 4", "input": [
	  {"role": "user", "content": "Where are my orders?"},
	  {"type": "function_call", "call_id": "c1", "name": "get_orders", "arguments": "{}"},
	  {"type": "function_call_output", "call_id": "c1", "output": ` + string(output) + `}]}`
	status, hdr, resp := h.post(t, "/v1/responses", body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, resp)
	}
	if got := hdr.Get("X-Factgate-Revisions"); got == "0" || got == "" {
		t.Fatalf("X-Factgate-Revisions %q, X-Factgate-Issues %q: the draft's errors were not caught", got, hdr.Get("X-Factgate-Issues"))
	}
	if issues := hdr.Get("X-Factgate-Issues"); !strings.HasPrefix(issues, "draft=C") || !strings.Contains(issues, "delivered=0") {
		t.Errorf("X-Factgate-Issues %q: want a draft with Contradictions and nothing delivered", issues)
	}
	tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
	if !strings.Contains(tr.Get("notes").Raw, "facts: records orders 5") {
		t.Errorf("the trace does not note the five orders read: %s", tr.Get("notes").Raw)
	}
}
