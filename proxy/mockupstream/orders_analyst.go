package mockupstream

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// OrdersAnalyst is a seeded stochastic model of a customer-support assistant
// answering about the customer's orders under the orders pack's contract: it
// reads the orders JSON the request carries (a user message or a tool result,
// {"orders": [...]}), writes a sentence per order it speaks of and a claims block
// (orderClaims), and makes each claim wrong with probability ErrorRate in one of
// the ways assistants get order records wrong (OrdersAnalystErrors). Asked to
// revise (an assistant answer followed by a user turn), it fixes each wrong claim
// whose order the revision request names with probability FixRate and repeats
// the rest. As Analyst, every answer is a function of Seed, the rates and the
// request (the messages before its draft pick the case: vary a line such as
// "#case 17" in the system message). A request without orders gets a short
// answer without claims.
type OrdersAnalyst struct {
	// Seed makes the answers reproducible.
	Seed uint64
	// ErrorRate is the probability that each claim of a first answer is wrong.
	ErrorRate float64
	// FixRate is the probability that a revision fixes each wrong claim its
	// request names.
	FixRate float64
}

// OrdersAnalystErrors are the kinds of wrong claims an OrdersAnalyst makes, with
// the issue the orders pack reports for each:
//   - status: another status than the record's (order.status_mismatch);
//   - amount: the total off by 10% (order.amount_mismatch);
//   - date: the event dated three days before the order was placed
//     (order.date_before_placed);
//   - refund: a refund on an order that has none (order.refund_not_recorded), or
//     another amount than the one refunded (order.refund_mismatch);
//   - ghost: the claim made about an order id the customer does not have
//     (order.unknown);
//   - unsupported: "confirmed" with no evidence (order.no_evidence, WeakEvidence:
//     below the default threshold, so downgraded rather than revised).
var OrdersAnalystErrors = []string{"status", "amount", "date", "refund", "ghost", "unsupported"}

// OrdersMarker is the orders pack's claims marker.
const OrdersMarker = "[machine-readable claims]"

// Rule returns a script rule that answers every request with the model.
func (a *OrdersAnalyst) Rule() Rule { return Rule{Name: "orders-analyst", Generate: a.Answer} }

// orderRecord is an order as the model reads it.
type orderRecord struct {
	ID, Status, Currency       string
	Total, Refunded            float64
	Placed, Shipped, Delivered string
	HasTotal, HasRefund        bool
}

// orderClaim is one claim as the model writes it.
type orderClaim struct {
	Order         string   `json:"order"`
	Claim         string   `json:"claim"`
	Status        string   `json:"status,omitempty"`
	Amount        *float64 `json:"amount,omitempty"`
	Date          string   `json:"date,omitempty"`
	Refund        *float64 `json:"refund,omitempty"`
	EvidenceLevel string   `json:"evidenceLevel"`
	Evidence      []string `json:"evidence"`
}

// ordersOf reads the orders of the first message (user or tool) that carries
// an "orders" array.
func ordersOf(msgs []Message) []orderRecord {
	for _, m := range msgs {
		if m.Role != "user" && m.Role != "tool" {
			continue
		}
		text := strings.TrimSpace(m.Text)
		i := strings.IndexByte(text, '{')
		if i < 0 {
			continue
		}
		arr := gjson.Get(text[i:], "orders")
		if !arr.IsArray() {
			continue
		}
		var out []orderRecord
		arr.ForEach(func(_, o gjson.Result) bool {
			r := orderRecord{ID: o.Get("id").String(), Status: o.Get("status").Str, Currency: o.Get("currency").Str,
				Placed: o.Get("placed").Str, Shipped: o.Get("shipped").Str, Delivered: o.Get("delivered").Str}
			if t := o.Get("total"); t.Exists() {
				r.Total, r.HasTotal = t.Float(), true
			}
			if f := o.Get("refunded"); f.Exists() && f.Float() > 0 {
				r.Refunded, r.HasRefund = f.Float(), true
			}
			if r.ID != "" {
				out = append(out, r)
			}
			return true
		})
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// Answer writes the model's answer to req.
func (a *OrdersAnalyst) Answer(req Request) Answer {
	orders := ordersOf(req.Messages)
	lastUser, assistant := -1, -1
	for i, m := range req.Messages {
		switch m.Role {
		case "user":
			lastUser = i
		case "assistant":
			if strings.TrimSpace(m.Text) != "" {
				assistant = i
			}
		}
	}
	if len(orders) == 0 || lastUser < 0 {
		return Answer{Content: "I could not find any orders in this conversation. Could you give me your order number?"}
	}
	revising := assistant >= 0 && assistant < lastUser
	end := len(req.Messages)
	if revising {
		end = assistant
	}
	var key strings.Builder
	for _, m := range req.Messages[:end] {
		key.WriteString(m.Role)
		key.WriteByte(0)
		key.WriteString(m.Text)
		key.WriteByte(0)
	}
	slots := a.plan(orders, key.String())
	if !revising {
		written := make([]orderClaim, len(slots))
		for i, s := range slots {
			written[i] = s.truth
			if s.wrong != nil {
				written[i] = *s.wrong
			}
		}
		return Answer{Content: renderOrders(written)}
	}
	return Answer{Content: a.revise(slots, key.String(), req.Messages[assistant].Text, req.Messages[lastUser].Text)}
}

// orderSlot is one claim of an answer: the truth and, when wrong, what the
// model wrote instead.
type orderSlot struct {
	truth orderClaim
	wrong *orderClaim
	kind  string
}

func (a *OrdersAnalyst) rng(parts ...string) *rand.Rand {
	return (&Analyst{Seed: a.Seed}).rng(parts...)
}

// plan draws the case's claims (one per order, up to four) and the errors of its
// first answer.
func (a *OrdersAnalyst) plan(orders []orderRecord, caseKey string) []orderSlot {
	r := a.rng("orders-plan", caseKey)
	picked := slices.Clone(orders)
	r.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })
	picked = picked[:min(len(picked), 2+r.IntN(3))]
	var slots []orderSlot
	for i, o := range picked {
		s := orderSlot{truth: trueOrderClaim(o, r)}
		if e := a.rng("orders-error", caseKey, strconv.Itoa(i)); e.Float64() < a.ErrorRate {
			s.kind, s.wrong = orderError(e, o, s.truth)
		}
		slots = append(slots, s)
	}
	return slots
}

// trueOrderClaim is what the record shows about o, stated as the model states
// it: its status with the date of that status, and its total or its refund.
func trueOrderClaim(o orderRecord, r *rand.Rand) orderClaim {
	c := orderClaim{Order: o.ID, Status: o.Status, EvidenceLevel: "confirmed", Evidence: []string{"order|" + o.ID + "|status"}}
	switch {
	case o.Status == "delivered" && o.Delivered != "":
		c.Date = o.Delivered
		c.Evidence = append(c.Evidence, "order|"+o.ID+"|delivered")
	case o.Status == "shipped" && o.Shipped != "":
		c.Date = o.Shipped
		c.Evidence = append(c.Evidence, "order|"+o.ID+"|shipped")
	}
	if o.HasRefund {
		v := o.Refunded
		c.Refund = &v
		c.Evidence = append(c.Evidence, "order|"+o.ID+"|refunded")
	} else if o.HasTotal && r.IntN(2) == 0 {
		v := o.Total
		c.Amount = &v
		c.Evidence = append(c.Evidence, "order|"+o.ID+"|total")
	}
	c.Claim = orderSentence(c)
	return c
}

var orderStatuses = []string{"pending", "paid", "shipped", "delivered", "cancelled", "returned", "refunded"}

// orderError makes a wrong version of the true claim c about o.
func orderError(r *rand.Rand, o orderRecord, c orderClaim) (string, *orderClaim) {
	w := c
	w.Evidence = slices.Clone(c.Evidence)
	kinds := []string{"status", "date", "refund", "ghost", "unsupported"}
	if o.HasTotal {
		kinds = append(kinds, "amount")
	}
	kind := kinds[r.IntN(len(kinds))]
	switch kind {
	case "status":
		others := slices.DeleteFunc(slices.Clone(orderStatuses), func(s string) bool { return s == o.Status })
		w.Status = others[r.IntN(len(others))]
		w.Date = ""
	case "amount":
		v := float64(int(o.Total*110+0.5)) / 100
		w.Amount, w.Refund = &v, nil
	case "date":
		placed, err := time.Parse("2006-01-02", o.Placed)
		if err != nil {
			return orderError(r, orderRecord{ID: o.ID, Status: o.Status}, c)
		}
		w.Date = placed.AddDate(0, 0, -3).Format("2006-01-02")
	case "refund":
		v := o.Total
		if o.HasRefund {
			v = float64(int(o.Refunded*50+0.5)) / 100
		}
		if v <= 0 {
			v = 10
		}
		w.Refund, w.Amount = &v, nil
	case "ghost":
		w.Order = o.ID + "9"
		for i, e := range w.Evidence {
			w.Evidence[i] = strings.Replace(e, "|"+o.ID+"|", "|"+w.Order+"|", 1)
		}
	case "unsupported":
		w.Evidence = []string{}
	}
	w.Claim = orderSentence(w)
	return kind, &w
}

// orderSentence states a claim in words.
func orderSentence(c orderClaim) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Order %s", c.Order)
	if c.Status != "" {
		fmt.Fprintf(&b, " is %s", c.Status)
		if c.Date != "" {
			fmt.Fprintf(&b, " (since %s)", c.Date)
		}
	} else if c.Date != "" {
		fmt.Fprintf(&b, " dates from %s", c.Date)
	}
	if c.Amount != nil {
		fmt.Fprintf(&b, ", total %.2f", *c.Amount)
	}
	if c.Refund != nil {
		fmt.Fprintf(&b, ", refunded %.2f", *c.Refund)
	}
	return b.String()
}

// revise answers a revision request: each wrong claim of basis whose order the
// request's turn names is fixed with probability FixRate.
func (a *OrdersAnalyst) revise(slots []orderSlot, caseKey, basis, turn string) string {
	block := gjson.Parse(claimsJSONAfter(basis, OrdersMarker)).Get("orderClaims")
	written := make([]orderClaim, len(slots))
	for i, s := range slots {
		written[i] = s.truth
		cur := block.Get(strconv.Itoa(i))
		if !cur.Exists() {
			continue
		}
		var w orderClaim
		if err := json.Unmarshal([]byte(cur.Raw), &w); err != nil || w.Claim == s.truth.Claim && w.Order == s.truth.Order && len(w.Evidence) == len(s.truth.Evidence) {
			continue // right in basis
		}
		written[i] = w
		if !strings.Contains(turn, w.Order) && !strings.Contains(turn, s.truth.Order) {
			continue
		}
		if a.rng("orders-fix", caseKey, strconv.Itoa(i), basis).Float64() < a.FixRate {
			written[i] = s.truth
		}
	}
	return renderOrders(written)
}

// claimsJSONAfter returns the ```json block after the last marker of content.
func claimsJSONAfter(content, marker string) string {
	i := strings.LastIndex(content, marker)
	if i < 0 {
		return ""
	}
	rest := content[i:]
	start := strings.Index(rest, "```json\n")
	end := strings.LastIndex(rest, "```")
	if start < 0 || end <= start {
		return ""
	}
	return rest[start+len("```json\n") : end]
}

// renderOrders writes an answer stating the claims: a sentence each, then the
// marker and the claims block.
func renderOrders(claims []orderClaim) string {
	var b strings.Builder
	b.WriteString("Here is where your orders stand:\n")
	for _, c := range claims {
		b.WriteString("- ")
		b.WriteString(c.Claim)
		b.WriteString(".\n")
	}
	b.WriteString("\nLet me know if there is anything else I can help with.\n\n")
	b.WriteString(OrdersMarker)
	b.WriteString("\n```json\n{\"orderClaims\": [")
	for i, c := range claims {
		if i > 0 {
			b.WriteByte(',')
		}
		j, _ := json.Marshal(c)
		b.WriteString("\n  ")
		b.Write(j)
	}
	b.WriteString("\n]}\n```\n")
	return b.String()
}

// TrueStatements says, for each claim of an answer the model wrote about the
// orders in the request's messages, whether its statement is true (the claim's
// text is one of the model's true claims about an order). By claim path
// ("orderClaims[1]"); ok is false when there are no orders or no claims block.
func (a *OrdersAnalyst) TrueStatements(msgs []Message, content string) (map[string]bool, bool) {
	orders := ordersOf(msgs)
	block := gjson.Parse(claimsJSONAfter(content, OrdersMarker))
	if len(orders) == 0 || !block.IsObject() {
		return nil, false
	}
	out := map[string]bool{}
	block.Get("orderClaims").ForEach(func(k, v gjson.Result) bool {
		id := v.Get("order").Str
		i := slices.IndexFunc(orders, func(o orderRecord) bool { return o.ID == id })
		ok := i >= 0
		if ok {
			o := orders[i]
			ok = (v.Get("status").Str == "" || v.Get("status").Str == o.Status) &&
				(!v.Get("amount").Exists() || o.HasTotal && v.Get("amount").Float() == o.Total) &&
				(!v.Get("refund").Exists() || o.HasRefund && v.Get("refund").Float() == o.Refunded) &&
				(v.Get("date").Str == "" || v.Get("date").Str == o.Shipped || v.Get("date").Str == o.Delivered)
		}
		out["orderClaims["+k.String()+"]"] = ok
		return true
	})
	return out, true
}
