package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/proxy/mockupstream"
)

// --- factgate demo --pack orders: the orders pack's story ---

// ordersDemoConfig routes model "support" through the orders pack: knowledge and
// the claims contract injected, answers validated and revised (configs/orders.yaml
// is the same route for a standalone proxy).
const ordersDemoConfig = `
server:
  listen: 127.0.0.1:0
  drain_grace: 0s
log:
  level: warn
  access: false
upstreams:
  mock:
    base_url: "%MOCK%"
routes:
  - name: support
    models: [support]
    upstream: mock
    upstream_model: deepseek-chat
    pack: orders
    inject: {}
    validate: {}
    revise: {}
`

// ordersDemoJSON is what the app's get_orders tool returned.
const ordersDemoJSON = `{"customer": "C-2291", "orders": [
  {"id": "A-1001", "status": "shipped", "total": 59.90, "currency": "EUR", "placed": "2026-03-01", "shipped": "2026-03-03", "region": "EU", "channel": "web", "items": ["Trail shoes"]},
  {"id": "A-1003", "status": "refunded", "total": 35.50, "currency": "EUR", "placed": "2026-01-20", "shipped": "2026-01-21", "delivered": "2026-01-24", "refunded": 35.50, "region": "EU", "channel": "web", "items": ["Water bottle", "Cap"]}
]}`

// The story: the draft says the shoes were delivered (the record says shipped,
// on their way); the revision says what the record shows.
const (
	ordersDemoDraft = "Good news! Your trail shoes (order A-1001) were delivered on 3 March, and the 35.50 EUR for order A-1003 has been refunded to your card.\n\n" +
		"[machine-readable claims]\n```json\n{\"orderClaims\": [\n" +
		"  {\"order\": \"A-1001\", \"claim\": \"Order A-1001 was delivered on 2026-03-03\", \"status\": \"delivered\", \"date\": \"2026-03-03\", \"evidenceLevel\": \"confirmed\", \"evidence\": [\"order|A-1001|status\"]},\n" +
		"  {\"order\": \"A-1003\", \"claim\": \"Order A-1003 was refunded 35.50 EUR\", \"status\": \"refunded\", \"refund\": 35.50, \"evidenceLevel\": \"confirmed\", \"evidence\": [\"order|A-1003|status\", \"order|A-1003|refunded\"]}\n" +
		"]}\n```\n"
	ordersDemoCorrected = "Your trail shoes (order A-1001) shipped on 3 March and are on their way to you; the carrier has not confirmed delivery yet. The 35.50 EUR for order A-1003 has been refunded to your card.\n\n" +
		"[machine-readable claims]\n```json\n{\"orderClaims\": [\n" +
		"  {\"order\": \"A-1001\", \"claim\": \"Order A-1001 shipped on 2026-03-03\", \"status\": \"shipped\", \"date\": \"2026-03-03\", \"evidenceLevel\": \"confirmed\", \"evidence\": [\"order|A-1001|status\", \"order|A-1001|shipped\"]},\n" +
		"  {\"order\": \"A-1003\", \"claim\": \"Order A-1003 was refunded 35.50 EUR\", \"status\": \"refunded\", \"refund\": 35.50, \"evidenceLevel\": \"confirmed\", \"evidence\": [\"order|A-1003|status\", \"order|A-1003|refunded\"]}\n" +
		"]}\n```\n"
)

// ordersDemoRules are the mock's answers for the story: the corrected answer for
// the hidden revision request (it carries the draft as an assistant turn), the
// draft for the app's request.
func ordersDemoRules() []mockupstream.Rule {
	return []mockupstream.Rule{
		{Name: "orders-revision", Match: mockupstream.Match{Assistant: "were delivered on 3 March"},
			Answer: &mockupstream.Answer{Content: ordersDemoCorrected, Usage: &mockupstream.Usage{PromptTokens: 2410, CompletionTokens: 160}}},
		{Name: "orders-draft", Match: mockupstream.Match{AnyMessage: `"orders"`},
			Answer: &mockupstream.Answer{Content: ordersDemoDraft, Usage: &mockupstream.Usage{PromptTokens: 1980, CompletionTokens: 150}}},
	}
}

func runOrdersDemo(ctx context.Context, stdout, stderr io.Writer) int {
	d, err := startDemoWith(&mockupstream.Script{Rules: ordersDemoRules()}, ordersDemoConfig)
	if err != nil {
		fmt.Fprintln(stderr, "factgate demo:", err)
		return 1
	}
	defer d.close()
	if err := d.runOrders(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "factgate demo:", err)
		return 1
	}
	return 0
}

// ordersDemoRequest is the app's request: the customer's question, the app's
// get_orders tool call and its result.
func ordersDemoRequest() goopenai.ChatCompletionRequest {
	return goopenai.ChatCompletionRequest{
		Model: "support",
		Messages: []goopenai.ChatCompletionMessage{
			{Role: "system", Content: "You are the support assistant of Northwind Outfitters. Answer the customer about their orders."},
			{Role: "user", Content: "Hi, did my trail shoes arrive? And what happened with my refund?"},
			{Role: "assistant", ToolCalls: []goopenai.ToolCall{{ID: "call_1", Type: goopenai.ToolTypeFunction,
				Function: goopenai.FunctionCall{Name: "get_orders", Arguments: `{"customer":"C-2291"}`}}}},
			{Role: "tool", ToolCallID: "call_1", Content: ordersDemoJSON},
		},
	}
}

// runOrders tells the orders pack's story: draft with a contradiction, silent
// revision, clean answer.
func (d *demo) runOrders(ctx context.Context, w io.Writer) error {
	fmt.Fprintf(w, "factgate demo --pack orders\n  mock upstream  %s\n  proxy          %s   (an app sets its base URL to %s/v1)\n\n", d.mock.URL(), d.base, d.base)
	fmt.Fprintln(w, "A support app asks about a customer's orders through route \"support\" (pack orders: inject, validate, revise).")
	fmt.Fprintln(w, "The customer asks: \"Hi, did my trail shoes arrive? And what happened with my refund?\"")
	fmt.Fprintln(w, "The app called its get_orders tool; the tool result (a `tool` message) carries the orders:")
	indent(w, "   | ", ordersDemoJSON)

	req := ordersDemoRequest()
	resp, err := d.client().CreateChatCompletion(ctx, req)
	if err != nil {
		return fmt.Errorf("chat completion on route support: %w", err)
	}
	hdrs := d.hdrs.Clone()
	traceID := hdrs.Get("X-Factgate-Trace-Id")
	tr, err := d.trace(ctx, traceID)
	if err != nil {
		return err
	}
	recs, err := d.mock.WaitFor(2, 5*time.Second)
	if err != nil || len(recs) < 2 {
		return fmt.Errorf("the mock upstream saw %d calls, want the draft and a revision", len(recs))
	}

	fmt.Fprintln(w, "\n1. The model's first draft (scripted; the client never sees it):")
	indent(w, "   ", proseOfMarker(gjson.GetBytes(tr, "attempts.0.content").Str, mockupstream.OrdersMarker))
	fmt.Fprintln(w, "   + a claims block: A-1001 delivered on 2026-03-03 (confirmed), A-1003 refunded 35.50 (confirmed)")

	fmt.Fprintf(w, "\n2. The rules of the orders pack (rules.yaml, CEL) checked the claims against the order records: %s\n", gjson.GetBytes(tr, "attempts.0.counts").Str)
	printDraftIssues(w, "   - %-13s %-24s %-15s %s\n", tr)

	turn := lastUserTurn(recs[1].Body)
	fmt.Fprintln(w, "\n3. The hidden revision request: the original messages, the draft as the assistant turn, and this user turn:")
	indent(w, "   | ", abbreviate(turn, 14))

	fmt.Fprintln(w, "\n4. The model's corrected answer (scripted):")
	indent(w, "   ", proseOfMarker(ordersDemoCorrected, mockupstream.OrdersMarker))

	fmt.Fprintln(w, "\n5. What the customer received (the claims block is stripped: the proxy injected the contract, the app never asked):")
	indent(w, "   ", resp.Choices[0].Message.Content)
	fmt.Fprintf(w, "   X-Factgate-Revisions: %s\n   X-Factgate-Issues:    %s\n   X-Factgate-Trace-Id:  %s\n",
		hdrs.Get("X-Factgate-Revisions"), hdrs.Get("X-Factgate-Issues"), traceID)
	fmt.Fprintf(w, "   outcome %q; the whole story (attempts, issues, the facts' records): GET %s/factgate/v1/traces/%s\n",
		gjson.GetBytes(tr, "final.outcome").Str, d.base, traceID)
	fmt.Fprintln(w, "\nThe pack is a folder of data (knowledge/packs/orders): docs/packs.md walks through writing one.")
	return nil
}

// proseOfMarker returns an answer without its claims block.
func proseOfMarker(answer, marker string) string {
	if i := strings.Index(answer, marker); i >= 0 {
		return strings.TrimSpace(answer[:i])
	}
	return strings.TrimSpace(answer)
}
