package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// CaseHeader names the case a request of the evaluation belongs to. It starts with
// X-Factgate-, so the proxy never forwards it: no provider sees which case, chunk
// or proposal a judge or revision call is for.
const CaseHeader = "X-Factgate-Eval-Case"

// draftStage is the route's innermost stage during an evaluation: its request
// phase answers in place of the producer with the case's scripted first draft, so
// that every outer stage — the validators, the judge, the hidden revision — runs
// on it exactly as on a real answer, and every later call (judge, revision) goes to
// the real upstreams through the proxy.
//
// Failure: a request without a known case (nothing else should reach the
// evaluation's proxy) fails with 400; it is never forwarded.
type draftStage struct {
	drafts map[string]string // case id -> the draft's content
}

// Name implements interceptors.Interceptor.
func (d *draftStage) Name() string { return "eval-draft" }

// OnRequest implements interceptors.RequestPhase: it short-circuits the upstream
// call with the case's draft.
func (d *draftStage) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	var id string
	if ex.Header != nil {
		id = string(ex.Header.Peek(CaseHeader))
	}
	content, ok := d.drafts[id]
	if !ok {
		return interceptors.Errorf(400, "invalid_request_error", "eval_unknown_case", "no evaluation case %q (header %s)", id, CaseHeader)
	}
	body, err := json.Marshal(openai.ChatCompletionResponse{
		ID:      "eval-draft",
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   gjson.GetBytes(ex.Body, "model").Str,
		Choices: []openai.ChatCompletionChoice{{
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: content},
			FinishReason: openai.FinishReasonStop,
		}},
	})
	if err != nil {
		return fmt.Errorf("encoding the scripted draft: %w", err)
	}
	ex.Response = &interceptors.Response{Status: 200, Header: [][2]string{{"Content-Type", "application/json"}}, Body: body}
	return nil
}

// proposalAnswer is a scripted first draft: the answer shape's fields with
// placeholders, and the proposed value at its path.
func proposalAnswer(shape *knowledge.AnswerShape, proposedPath, value string) (string, error) {
	fields := make([]string, 0, len(shape.Fields))
	for f := range shape.Fields {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	doc := []byte("{}")
	var err error
	for _, f := range fields {
		var v any = "A placeholder the evaluation wrote."
		switch shape.Fields[f] {
		case "number":
			v = 0
		case "boolean":
			v = false
		}
		if doc, err = sjson.SetBytes(doc, gjson.Escape(f), v); err != nil {
			return "", err
		}
	}
	if doc, err = sjson.SetBytes(doc, proposedPath, value); err != nil {
		return "", fmt.Errorf("setting the proposed value at %q: %w", proposedPath, err)
	}
	return string(doc), nil
}

var _ interceptors.RequestPhase = (*draftStage)(nil)
