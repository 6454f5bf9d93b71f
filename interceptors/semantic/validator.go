package semantic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"github.com/sashabaranov/go-openai/jsonschema"
	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// The issue codes of the semantic validators (PRODUCT.md §8).
const (
	// CodeRejected (Contradiction): the judge gave a consistent rejecting verdict.
	// The recommendation is the pack's correction guidance, which the hidden
	// revision sends back to the model.
	CodeRejected = "semantic.rejected"
	// CodeFailed (Warning; Fatal under failure_policy closed): the judge could not
	// give a valid verdict within the retry budget — validation is incomplete.
	CodeFailed = "semantic.failed"
)

// The results of a judge call, in the trace (interceptors.Call) and in the
// factgate_semantic_calls_total metric's result label.
const (
	// ResultOK: the call gave a valid verdict.
	ResultOK = "ok"
	// ResultFailed: no valid verdict (a transport error, a timeout, a non-2xx
	// status, malformed or inconsistent output); retried within the budget.
	ResultFailed = "failed"
	// ResultCancelled: the client went away during the call.
	ResultCancelled = "cancelled"
	// ResultBudgetExhausted: the hidden revision's wall-clock budget ran out
	// during the call (interceptors.ErrBudgetExhausted). The answer being revised
	// counts as one the validator could not check.
	ResultBudgetExhausted = "budget_exhausted"
)

// Bounds of what a judge call carries.
const (
	// MaxSourceBytes bounds the source text sent to the judge. A larger text is an
	// execution failure, never cut: a judgment on part of a chunk is no judgment of
	// the chunk.
	MaxSourceBytes = 256 << 10
	// MaxGuidanceExplanation bounds, in characters, the judge's explanation as the
	// correction guidance quotes it (cut at a word, with an ellipsis).
	MaxGuidanceExplanation = 300
	// schemaName names the response schema. It is neutral on purpose: the model
	// must not see validator keys.
	schemaName = "verdict"
)

// Validator is one LLM-backed validator of a pack (a knowledge.SemanticSpec) with
// the route's model profile: an interceptors.AnswerValidator whose LLMBacked is
// true, so Exchange.ValidateAnswer runs it after the deterministic validators and
// only when they found nothing Fatal.
//
// For each answer it reads the proposed value (the spec's gjson path into the
// answer's JSON object) and the source text (the client's last user message,
// narrowed by the spec's regex), asks the judge for a verdict under the strict
// contract — exactly "verdict" (an enum of the spec's verdicts) and "explanation",
// both required, no other property — and interprets it:
//
//   - approved: no issue;
//   - a consistent rejecting verdict: one semantic.rejected Contradiction at the
//     proposed value's path, whose recommendation is the pack's correction
//     guidance (what the value must become, and the explanation, bounded);
//   - anything else — malformed or extra output, an unknown verdict, a verdict
//     inconsistent with the proposal (VerdictSpec.Consistent), a blank or over-long
//     explanation, a refusal, a non-2xx status, a transport error or timeout — is
//     an execution failure, retried within the retry budget; then one
//     semantic.failed issue per the failure policy (Warning and validation
//     incomplete when open, Fatal when closed). Missing input (no JSON object, no
//     proposed value, no source text) is an execution failure without a call.
//
// The judge call goes straight to the upstream, never through the route's chain,
// so the judge's own answer is never validated. Every call's usage is added to the
// exchange's (the client's usage stays the sum of all calls) and the time to the
// trace ("semantic/<name>"). The candidate answer is never modified. A Validator is
// immutable and safe for concurrent use.
type Validator struct {
	name     string // "semantic/combat"
	route    string
	spec     *knowledge.SemanticSpec
	pack     *knowledge.Pack
	settings Settings
	// system is the stable prefix: the policy asset byte for byte, then the
	// instruction.
	system string
	// responseFormat is the strict json_schema response_format, its schema
	// pre-encoded.
	responseFormat *openai.ChatCompletionResponseFormat
	// label names the proposed value in the judge's input ("kind").
	label   string
	metrics *metrics // nil: none
	log     *slog.Logger
}

// NewValidator builds the validator named name (an entry of pack.Semantic) with the
// model profile s — use Config.Settings() for the defaults; here a zero Timeout
// means DefaultTimeout, an empty FailurePolicy means open and Retries is taken as
// it is. It fails when the pack has no such validator or the spec is incomplete
// (no verdicts, no policy text).
func NewValidator(pack *knowledge.Pack, name string, s Settings) (*Validator, error) {
	return newValidator(pack, name, s, "", nil, nil)
}

func newValidator(pack *knowledge.Pack, name string, s Settings, route string, m *metrics, log *slog.Logger) (*Validator, error) {
	if pack == nil {
		return nil, errors.New("semantic validator: no pack")
	}
	var spec *knowledge.SemanticSpec
	var have []string
	for i := range pack.Semantic {
		have = append(have, pack.Semantic[i].Name)
		if pack.Semantic[i].Name == name {
			spec = &pack.Semantic[i]
		}
	}
	if spec == nil {
		if len(have) == 0 {
			return nil, fmt.Errorf("pack %s declares no semantic validators", pack.Name)
		}
		return nil, fmt.Errorf("pack %s has no semantic validator %q (have %s)", pack.Name, name, strings.Join(have, ", "))
	}
	if len(spec.Verdicts) < 2 || strings.TrimSpace(spec.PolicyText) == "" || spec.MaxExplanation <= 0 || spec.Proposed == "" {
		return nil, fmt.Errorf("pack %s: semantic validator %q is incomplete (verdicts, policy, proposed and max_explanation are required)", pack.Name, name)
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.FailurePolicy == "" {
		s.FailurePolicy = FailOpen
	}
	s.Retries = min(max(s.Retries, 0), MaxRetries)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := &Validator{
		name:     "semantic/" + name,
		route:    route,
		spec:     spec,
		pack:     pack,
		settings: s,
		system:   systemPrompt(spec.PolicyText, spec.InstructionText),
		label:    spec.Proposed[strings.LastIndexByte(spec.Proposed, '.')+1:],
		metrics:  m,
		log:      log,
	}
	rf, err := responseFormat(spec)
	if err != nil {
		return nil, fmt.Errorf("pack %s: semantic validator %q: %w", pack.Name, name, err)
	}
	v.responseFormat = rf
	return v, nil
}

// systemPrompt is the judge's system message: the policy exactly as the asset
// holds it (so the producer's prompt and the judge's share it byte for byte), a
// blank line, the instruction.
func systemPrompt(policy, instruction string) string {
	var b strings.Builder
	b.WriteString(policy)
	if !strings.HasSuffix(policy, "\n") {
		b.WriteByte('\n')
	}
	if strings.TrimSpace(instruction) != "" {
		b.WriteByte('\n')
		b.WriteString(instruction)
	}
	return b.String()
}

// responseFormat renders the strict json_schema response_format of spec: exactly
// verdict (an enum of the spec's verdicts) and explanation, both required, no
// other property, no optional property, no uniqueItems. The schema is encoded once
// here, not on every call.
func responseFormat(spec *knowledge.SemanticSpec) (*openai.ChatCompletionResponseFormat, error) {
	verdicts := make([]string, len(spec.Verdicts))
	for i, vs := range spec.Verdicts {
		verdicts[i] = vs.Name
	}
	schema, err := json.Marshal(&jsonschema.Definition{
		Type: jsonschema.Object,
		Properties: map[string]jsonschema.Definition{
			"verdict":     {Type: jsonschema.String, Enum: verdicts},
			"explanation": {Type: jsonschema.String},
		},
		Required:             []string{"verdict", "explanation"},
		AdditionalProperties: false,
	})
	if err != nil {
		return nil, err
	}
	return &openai.ChatCompletionResponseFormat{
		Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
			Name:   schemaName,
			Strict: true,
			Schema: json.RawMessage(schema),
		},
	}, nil
}

// Name implements interceptors.AnswerValidator ("semantic/combat").
func (v *Validator) Name() string { return v.name }

// LLMBacked implements interceptors.AnswerValidator: the validator makes a paid call.
func (v *Validator) LLMBacked() bool { return true }

// Spec returns the pack's declaration of the validator.
func (v *Validator) Spec() *knowledge.SemanticSpec { return v.spec }

// Settings returns the validator's model profile and policies.
func (v *Validator) Settings() Settings { return v.settings }

// ValidateAnswer implements interceptors.AnswerValidator. Execution failures are
// issues (per the failure policy), not errors; the error is the context's when the
// client went away during a call.
func (v *Validator) ValidateAnswer(ctx context.Context, ex *interceptors.Exchange, content string) ([]interceptors.Issue, error) {
	start := time.Now()
	defer func() { ex.Trace.Time(v.name, time.Since(start)) }()
	proposed, source, err := v.inputs(ex, content)
	if err != nil {
		return []interceptors.Issue{v.failure(ex, err, 0, 0)}, nil
	}
	up, model, err := v.judge(ex)
	if err != nil {
		return []interceptors.Issue{v.failure(ex, err, 0, 0)}, nil
	}
	body, err := v.Request(model, source, proposed)
	if err != nil {
		return []interceptors.Issue{v.failure(ex, err, 0, 0)}, nil
	}
	var tokens int
	var last error
	for call := 1; call <= 1+v.settings.Retries; call++ {
		if ctx.Err() != nil {
			return v.stopped(ctx, ex, nil, call-1, tokens)
		}
		began := time.Now()
		j, usage, err := v.call(ctx, up, body, proposed)
		rec := interceptors.Call{Kind: "judge", Validator: v.name, Duration: units.Millis(time.Since(began)), Usage: usage}
		ex.Usage = ex.Usage.Add(usage)
		tokens += usage.TotalTokens
		v.metrics.addTokens(v.route, ex.Overrides.Variant, v.spec.Name, usage.TotalTokens)
		if ctx.Err() != nil {
			return v.stopped(ctx, ex, &rec, call, tokens)
		}
		if err != nil {
			rec.Result, rec.Error = ResultFailed, err.Error()
			ex.Trace.AddCall(rec)
			v.metrics.call(v.route, ex.Overrides.Variant, v.spec.Name, ResultFailed)
			last = err
			if call <= v.settings.Retries {
				ex.Trace.Note(fmt.Sprintf("%s: call %d failed (%v); retrying", v.name, call, err))
			}
			continue
		}
		rec.Result = ResultOK
		ex.Trace.AddCall(rec)
		v.metrics.call(v.route, ex.Overrides.Variant, v.spec.Name, ResultOK)
		return v.judged(ex, j, proposed, call, tokens, time.Since(start)), nil
	}
	return []interceptors.Issue{v.failure(ex, last, 1+v.settings.Retries, tokens)}, nil
}

// errBudgetExhausted is the execution failure of a judge call the revision budget
// ended.
var errBudgetExhausted = errors.New("the revision budget ran out before the judge gave a verdict")

// stopped ends a validation whose context ended (rec is the call it ended, nil
// when it ended between calls). When the revision budget ended it, the answer
// being revised is one the validator could not check: an execution failure per
// the failure policy, never retried (the budget is gone). When the client went
// away there is nobody to answer: no issue, the context's error.
func (v *Validator) stopped(ctx context.Context, ex *interceptors.Exchange, rec *interceptors.Call, calls, tokens int) ([]interceptors.Issue, error) {
	if errors.Is(context.Cause(ctx), interceptors.ErrBudgetExhausted) {
		if rec != nil {
			rec.Result, rec.Error = ResultBudgetExhausted, errBudgetExhausted.Error()
			ex.Trace.AddCall(*rec)
			v.metrics.call(v.route, ex.Overrides.Variant, v.spec.Name, ResultBudgetExhausted)
		}
		return []interceptors.Issue{v.failure(ex, errBudgetExhausted, calls, tokens)}, nil
	}
	if rec != nil {
		rec.Result, rec.Error = ResultCancelled, "the client went away"
		ex.Trace.AddCall(*rec)
		v.metrics.call(v.route, ex.Overrides.Variant, v.spec.Name, ResultCancelled)
		ex.Trace.Note(fmt.Sprintf("%s: the client went away during the judge call", v.name))
	}
	return nil, ctx.Err()
}

// errMissingInput marks a failure that no call could fix.
var errMissingInput = errors.New("missing input")

// inputs reads the proposed value from the answer's JSON object and the source text
// from the client's last user message.
func (v *Validator) inputs(ex *interceptors.Exchange, content string) (proposed, source string, err error) {
	obj, ok := validate.AnswerObject(content)
	if !ok {
		return "", "", fmt.Errorf("%w: the answer holds no single JSON object", errMissingInput)
	}
	p := gjson.Get(obj, v.spec.Proposed)
	switch {
	case !p.Exists():
		return "", "", fmt.Errorf("%w: the answer has no %q", errMissingInput, v.spec.Proposed)
	case p.Type != gjson.String || strings.TrimSpace(p.Str) == "":
		return "", "", fmt.Errorf("%w: the answer's %q is not a non-empty string", errMissingInput, v.spec.Proposed)
	}
	body := ex.Original
	if body == nil {
		body = ex.Body
	}
	text, ok := lastUserText(body)
	if !ok {
		return "", "", fmt.Errorf("%w: the request has no user message to judge", errMissingInput)
	}
	if re := v.spec.Source.Re; re != nil {
		m := re.FindStringSubmatch(text)
		i := re.SubexpIndex("value")
		if m == nil || i < 0 || strings.TrimSpace(m[i]) == "" {
			return "", "", fmt.Errorf("%w: the source rule matches nothing in the last user message", errMissingInput)
		}
		text = m[i]
	}
	switch {
	case strings.TrimSpace(text) == "":
		return "", "", fmt.Errorf("%w: the source text is empty", errMissingInput)
	case len(text) > MaxSourceBytes:
		return "", "", fmt.Errorf("%w: the source text has %d bytes, more than the %d a judge call carries", errMissingInput, len(text), MaxSourceBytes)
	}
	return p.Str, text, nil
}

// lastUserText returns the text of the body's last user message: its string
// content, or its text parts joined with "\n".
func lastUserText(body []byte) (string, bool) {
	var text string
	found := false
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		if m.Get("role").Str != "user" {
			return true
		}
		c := m.Get("content")
		switch {
		case c.Type == gjson.String:
			text, found = c.Str, true
		case c.IsArray():
			var parts []string
			c.ForEach(func(_, part gjson.Result) bool {
				if part.Get("type").Str == "text" {
					parts = append(parts, part.Get("text").Str)
				}
				return true
			})
			text, found = strings.Join(parts, "\n"), true
		}
		return true
	})
	return text, found
}

// judge returns the upstream and model of the judge calls.
func (v *Validator) judge(ex *interceptors.Exchange) (interceptors.Upstream, string, error) {
	model := v.settings.Model
	if model == "" {
		model = gjson.GetBytes(ex.Body, "model").Str
	}
	if model == "" {
		return nil, "", fmt.Errorf("%w: no judge model (set model in the semantic block)", errMissingInput)
	}
	if name := v.settings.Upstream; name != "" {
		if ex.UpstreamNamed == nil {
			return nil, "", fmt.Errorf("%w: no caller for upstream %q outside the proxy", errMissingInput, name)
		}
		up, ok := ex.UpstreamNamed(name)
		if !ok {
			return nil, "", fmt.Errorf("%w: no upstream named %q", errMissingInput, name)
		}
		return up, model, nil
	}
	if ex.Upstream == nil {
		return nil, "", fmt.Errorf("%w: no upstream to call outside the proxy", errMissingInput)
	}
	return ex.Upstream, model, nil
}

// Request renders the judge's chat completion request for a source text and a
// proposed value: the stable system message first (the policy, then the
// instruction — identical for every call, so provider prompt caches reuse it),
// then one user message with the variable input (the source text and the proposed
// value, nothing else: no ids, hashes, keys or codes); the temperature, max_tokens
// when set, stream false and the strict json_schema response_format.
func (v *Validator) Request(model, source, proposed string) ([]byte, error) {
	b, err := json.Marshal(judgeRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{
			Model: model,
			Messages: []openai.ChatCompletionMessage{
				{Role: openai.ChatMessageRoleSystem, Content: v.system},
				{Role: openai.ChatMessageRoleUser, Content: v.input(source, proposed)},
			},
			MaxTokens:      v.settings.MaxTokens,
			ResponseFormat: v.responseFormat,
		},
		Temperature: v.settings.Temperature,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the judge request: %w", err)
	}
	return b, nil
}

// judgeRequest is the judge's chat completion request. Its temperature replaces
// go-openai's, which leaves out a zero temperature (omitempty) — and a provider's
// default is not 0: the judge's temperature is always sent, as configured.
type judgeRequest struct {
	openai.ChatCompletionRequest
	Temperature float64 `json:"temperature"`
}

// input renders the variable part of the judge's prompt.
func (v *Validator) input(source, proposed string) string {
	var b strings.Builder
	b.Grow(len(source) + len(proposed) + 64)
	b.WriteString("## Text to judge\n\n")
	b.WriteString(strings.TrimRight(source, "\n"))
	b.WriteString("\n\n## Proposed ")
	b.WriteString(v.label)
	b.WriteString("\n\n")
	b.WriteString(proposed)
	b.WriteByte('\n')
	return b.String()
}

// judgment is a valid verdict.
type judgment struct {
	verdict     *knowledge.VerdictSpec
	explanation string
}

// call makes one judge call and interprets its answer. It returns the call's usage
// even when the answer is not valid.
func (v *Validator) call(ctx context.Context, up interceptors.Upstream, body []byte, proposed string) (judgment, interceptors.Usage, error) {
	cctx, cancel := context.WithTimeout(interceptors.WithCallKind(ctx, interceptors.CallKindJudge), v.settings.Timeout)
	defer cancel()
	resp, err := up.Complete(cctx, body)
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		return judgment{}, interceptors.Usage{}, &timeoutError{v.settings.Timeout}
	case err != nil:
		return judgment{}, interceptors.Usage{}, fmt.Errorf("the judge call failed: %w", err)
	}
	if err := rawjson.Check(resp.Body, v.settings.MaxJSONDepth); errors.Is(err, rawjson.ErrTooDeep) {
		return judgment{}, interceptors.Usage{}, fmt.Errorf("the judge answered with status %d and JSON nested deeper than server.max_json_depth", resp.Status)
	} else if err != nil {
		return judgment{}, interceptors.Usage{}, fmt.Errorf("the judge answered with status %d and a body that is not JSON", resp.Status)
	}
	usage := resp.Usage()
	if !resp.OK() {
		return judgment{}, usage, fmt.Errorf("the judge answered with status %d", resp.Status)
	}
	msg := gjson.GetBytes(resp.Body, "choices.0.message")
	if r := msg.Get("refusal"); r.Type == gjson.String && strings.TrimSpace(r.Str) != "" {
		return judgment{}, usage, fmt.Errorf("the judge refused: %s", bound(r.Str, 200))
	}
	j, err := v.parse(msg.Get("content").Str, proposed)
	return j, usage, err
}

// timeoutError is a judge call that got no answer within the timeout.
type timeoutError struct{ timeout time.Duration }

func (e *timeoutError) Error() string {
	return "the judge gave no answer within the timeout of " + e.timeout.String()
}

// parse reads the judge's content under the strict contract: a JSON object with
// exactly the string members verdict and explanation, the verdict one of the
// spec's and consistent with the proposal, the explanation non-blank and within
// the spec's bound.
func (v *Validator) parse(content, proposed string) (judgment, error) {
	c := strings.TrimSpace(content)
	jerr := rawjson.CheckString(c, v.settings.MaxJSONDepth)
	switch {
	case c == "":
		return judgment{}, errors.New("the judge's answer is empty")
	case errors.Is(jerr, rawjson.ErrTooDeep):
		return judgment{}, errors.New("the judge's answer nests JSON deeper than server.max_json_depth")
	case jerr != nil:
		return judgment{}, errors.New("the judge's answer is not valid JSON")
	case !gjson.Parse(c).IsObject():
		return judgment{}, errors.New("the judge's answer is not a JSON object")
	}
	var verdict, explanation *string
	var problem error
	gjson.Parse(c).ForEach(func(k, val gjson.Result) bool {
		var dst **string
		switch k.Str {
		case "verdict":
			dst = &verdict
		case "explanation":
			dst = &explanation
		default:
			problem = fmt.Errorf("the judge's answer has the extra field %q", bound(k.Str, 40))
			return false
		}
		switch {
		case *dst != nil:
			problem = fmt.Errorf("the judge's answer has %q twice", k.Str)
		case val.Type != gjson.String:
			problem = fmt.Errorf("the judge's %s is not a string", k.Str)
		default:
			s := val.Str
			*dst = &s
			return true
		}
		return false
	})
	switch {
	case problem != nil:
		return judgment{}, problem
	case verdict == nil:
		return judgment{}, errors.New("the judge's answer has no verdict")
	case explanation == nil:
		return judgment{}, errors.New("the judge's answer has no explanation")
	}
	vs := v.spec.Verdict(*verdict)
	switch n := utf8.RuneCountInString(*explanation); {
	case vs == nil:
		return judgment{}, fmt.Errorf("the judge's verdict %q is not one of the allowed verdicts", bound(*verdict, 40))
	case !vs.Consistent(proposed):
		return judgment{}, fmt.Errorf("the judge's verdict %q is inconsistent with the proposed %s %q", vs.Name, v.label, proposed)
	case strings.TrimSpace(*explanation) == "":
		return judgment{}, errors.New("the judge's explanation is blank")
	case n > v.spec.MaxExplanation:
		return judgment{}, fmt.Errorf("the judge's explanation has %d characters, more than the %d allowed", n, v.spec.MaxExplanation)
	}
	return judgment{verdict: vs, explanation: *explanation}, nil
}

// judged turns a valid verdict into the answer's issues: none for approval, one
// semantic.rejected Contradiction with the correction guidance otherwise.
func (v *Validator) judged(ex *interceptors.Exchange, j judgment, proposed string, calls, tokens int, took time.Duration) []interceptors.Issue {
	summary := fmt.Sprintf("%s: %s (%s, %d tokens, %s)", v.name, j.verdict.Name, plural(calls, "call"), tokens, took.Round(time.Millisecond))
	if j.verdict.Approves {
		v.metrics.outcome(v.route, ex.Overrides.Variant, v.spec.Name, "approved")
		ex.Trace.Note(summary)
		return nil
	}
	explanation := bound(oneLine(j.explanation), MaxGuidanceExplanation)
	guidance, ok, err := v.spec.RenderGuidance(j.verdict.Name, knowledge.GuidanceData{Proposed: proposed, Explanation: explanation, Target: j.verdict.Target})
	if err != nil || !ok || guidance == "" {
		why := "the pack has no guidance for it"
		if err != nil {
			why = err.Error()
		}
		return []interceptors.Issue{v.failure(ex, fmt.Errorf("verdict %s cannot be turned into guidance: %s", j.verdict.Name, why), calls, tokens)}
	}
	is := interceptors.Issue{
		Code:      CodeRejected,
		Severity:  interceptors.Contradiction,
		Path:      v.spec.Proposed,
		Validator: v.name,
		Args: map[string]string{
			"validator":   v.spec.Name,
			"verdict":     j.verdict.Name,
			"proposed":    proposed,
			"target":      j.verdict.Target,
			"explanation": explanation,
			"guidance":    guidance,
		},
		Recommendation: interceptors.Recommendation{Text: guidance},
	}
	if text, ok, err := v.pack.FormatIssue(CodeRejected, is); ok && err == nil {
		is.Message = text.Message
		if text.Recommendation != "" {
			is.Recommendation.Text = guidance + " " + text.Recommendation
		}
	}
	if is.Message == "" {
		is.Message = render(englishRejected, is)
	}
	v.metrics.outcome(v.route, ex.Overrides.Variant, v.spec.Name, "rejected")
	ex.Trace.Note(summary + ": " + explanation)
	return []interceptors.Issue{is}
}

// failure records an execution failure per the failure policy and returns its
// issue: Warning and validation incomplete when open, Fatal when closed.
func (v *Validator) failure(ex *interceptors.Exchange, err error, calls, tokens int) interceptors.Issue {
	sev := interceptors.Warning
	if v.settings.FailurePolicy == FailClosed {
		sev = interceptors.Fatal
	}
	reason := err.Error()
	if errors.Is(err, errMissingInput) {
		reason = strings.TrimPrefix(reason, errMissingInput.Error()+": ")
	}
	is := interceptors.Issue{
		Code:      CodeFailed,
		Severity:  sev,
		Path:      v.spec.Proposed,
		Validator: v.name,
		Args:      map[string]string{"validator": v.spec.Name, "error": reason},
	}
	if text, ok, ferr := v.pack.FormatIssue(CodeFailed, is); ok && ferr == nil {
		is.Message, is.Recommendation.Text = text.Message, text.Recommendation
	}
	if is.Message == "" {
		is.Message = render(englishFailed, is)
	}
	var timeout *timeoutError
	setFailure(ex, v.name, failureState{reason: reason, timeout: errors.As(err, &timeout)})
	ex.Trace.Do(func(t *interceptors.Trace) { t.ValidationIncomplete = true })
	then := "failure_policy open: the answer passes unchecked"
	if sev == interceptors.Fatal {
		then = "failure_policy closed: the answer is not accepted"
	}
	ex.Trace.Note(fmt.Sprintf("%s: execution failure after %s (%d tokens): %s; %s", v.name, plural(calls, "call"), tokens, reason, then))
	v.log.Warn("semantic validator could not run", "route", v.route, "validator", v.spec.Name, "calls", calls, "error", reason, "failure_policy", string(v.settings.FailurePolicy))
	v.metrics.outcome(v.route, ex.Overrides.Variant, v.spec.Name, "failed")
	return is
}

// failureState is the last execution failure of a validator in one exchange.
type failureState struct {
	reason  string
	timeout bool
}

// failureKey stores a validator's failureState in the exchange.
type failureKey struct{ validator string }

func setFailure(ex *interceptors.Exchange, name string, f failureState) {
	ex.SetValue(failureKey{name}, f)
}

func lastFailure(ex *interceptors.Exchange, name string) (failureState, bool) {
	f, ok := ex.Value(failureKey{name}).(failureState)
	return f, ok
}

// English messages for packs without templates for the semantic codes.
var (
	englishRejected = template.Must(template.New(CodeRejected).Option("missingkey=zero").Parse(
		`The proposed {{or .Path "value"}} "{{.Args.proposed}}" does not fit the source text.`))
	englishFailed = template.Must(template.New(CodeFailed).Option("missingkey=zero").Parse(
		`The {{or .Args.validator "semantic"}} check could not run{{with .Args.error}} ({{.}}){{end}}; validation is incomplete.`))
)

func render(t *template.Template, is interceptors.Issue) string {
	var b strings.Builder
	if err := t.Execute(&b, is); err != nil {
		return is.Code
	}
	return strings.TrimSpace(b.String())
}

// oneLine collapses runs of white space (line breaks included) into one space, so
// quoted text stays one item of a numbered list.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// bound cuts s to at most n characters, at a word boundary when there is one in
// the last fifth, with an ellipsis.
func bound(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	cut := n - 1
	for i := cut; i > n*4/5; i-- {
		if unicode.IsSpace(runes[i]) {
			cut = i
			break
		}
	}
	return strings.TrimRightFunc(string(runes[:cut]), unicode.IsSpace) + "…"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

var _ interceptors.AnswerValidator = (*Validator)(nil)
