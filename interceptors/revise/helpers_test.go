package revise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/knowledge"
)

const marker = "[机器可读声明]"

var (
	packOnce sync.Once
	ra3Pack  *knowledge.Pack
	dndPack  *knowledge.Pack
	packErr  error
)

func packs(t testing.TB) (*knowledge.Pack, *knowledge.Pack) {
	t.Helper()
	packOnce.Do(func() {
		reg, err := knowledge.Builtin()
		if err != nil {
			packErr = err
			return
		}
		ra3Pack, dndPack = reg.Pack("ra3"), reg.Pack("dnd")
	})
	if packErr != nil {
		t.Fatalf("loading the built-in packs: %v", packErr)
	}
	return ra3Pack, dndPack
}

// unit is one unit claim of a test answer.
type unit struct {
	id           int
	claim        string
	level        string
	evidence     []string
	alternatives []string
}

// answer renders prose followed by the marker and a fenced claims block.
func answer(prose string, units ...unit) string {
	type uc struct {
		UnitID            int      `json:"unitId"`
		Player            string   `json:"player"`
		Claim             string   `json:"claim"`
		EvidenceLevel     string   `json:"evidenceLevel"`
		Evidence          []string `json:"evidence"`
		Alternatives      []string `json:"alternatives"`
		NeedsConfirmation []string `json:"needsConfirmation"`
	}
	block := struct {
		UnitClaims     []uc  `json:"unitClaims"`
		EventClaims    []any `json:"eventClaims"`
		TimelineClaims []any `json:"timelineClaims"`
	}{UnitClaims: []uc{}, EventClaims: []any{}, TimelineClaims: []any{}}
	for _, u := range units {
		block.UnitClaims = append(block.UnitClaims, uc{u.id, "PlayerA", u.claim, u.level, nonNil(u.evidence), nonNil(u.alternatives), []string{}})
	}
	b, _ := json.MarshalIndent(block, "", "  ")
	return prose + "\n\n" + marker + "\n```json\n" + string(b) + "\n```\n"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// rule flags a unit claim (unitId + claim) the way a validator rule does.
type rule struct {
	code     string
	severity interceptors.Severity
	rec      interceptors.Recommendation
	// confident applies the rule only to confirmed / highly likely claims, as the
	// WeakEvidence rules do.
	confident bool
	facts     []interceptors.FactLine
}

// fakeValidator checks answers with fixed rules per unit claim, a Fatal
// claims.missing for an answer without a block, and a failure on demand.
type fakeValidator struct {
	parser *claims.Parser
	rules  map[string]rule // "733 AlliedBomberAircraft"
	fail   error
	calls  int
	mu     sync.Mutex
}

func newFakeValidator(t testing.TB, rules map[string]rule) *fakeValidator {
	t.Helper()
	ra3, _ := packs(t)
	p, err := claims.NewParser(ra3.Claims, ra3.Facts.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeValidator{parser: p, rules: rules}
}

func (v *fakeValidator) Name() string    { return "fake" }
func (v *fakeValidator) LLMBacked() bool { return false }
func (v *fakeValidator) ValidateAnswer(_ context.Context, _ *interceptors.Exchange, content string) ([]interceptors.Issue, error) {
	v.mu.Lock()
	v.calls++
	v.mu.Unlock()
	c := v.parser.Parse(content, claims.Required)
	issues := append([]interceptors.Issue(nil), c.Issues...)
	for i := range c.UnitClaims {
		u := &c.UnitClaims[i]
		r, ok := v.rules[strconv.FormatInt(u.UnitID, 10)+" "+u.Claim]
		// As the identity rules do, no rule flags a claim that rules the identity out.
		if !ok || (r.confident && !u.Level.AtLeastHighlyLikely()) || u.Level.RulesOut() {
			continue
		}
		issues = append(issues, interceptors.Issue{
			Code: r.code, Severity: r.severity, Path: u.Path, Validator: "fake",
			Message: fmt.Sprintf("UnitId %d 不可能是 %s（%s）。", u.UnitID, u.Claim, r.code), Recommendation: r.rec, Facts: r.facts,
		})
	}
	return issues, v.fail
}

// reply is one scripted upstream answer.
type reply struct {
	content string
	status  int    // 0: 200
	raw     string // the whole body, when set
	err     error
	hang    bool // wait for the context to end
	usage   interceptors.Usage
}

// fakeUpstream answers hidden calls from a script (the last reply repeats) and
// records every request body.
type fakeUpstream struct {
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
}

func (u *fakeUpstream) Complete(ctx context.Context, body []byte) (*interceptors.Response, error) {
	u.mu.Lock()
	u.bodies = append(u.bodies, append([]byte(nil), body...))
	n := len(u.bodies)
	r := reply{content: "no reply scripted"}
	if len(u.replies) > 0 {
		r = u.replies[min(n, len(u.replies))-1]
	}
	u.mu.Unlock()
	if r.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	status := r.status
	if status == 0 {
		status = 200
	}
	out := []byte(r.raw)
	if r.raw == "" {
		out = completion(r.content, r.usage)
	}
	return &interceptors.Response{Status: status, Body: out}, nil
}

func (u *fakeUpstream) requests() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.bodies...)
}

func completion(content string, usage interceptors.Usage) []byte {
	c, _ := json.Marshal(content)
	return []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` +
		string(c) + `},"finish_reason":"stop"}],"usage":` + string(usage.JSON()) + `}`)
}

func usage(p, c int) interceptors.Usage {
	return interceptors.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

// originalRequest is the outgoing request of the tests: a system prompt (as if
// injected), the log, and fields factgate does not know.
const originalRequest = `{"model":"deepseek-chat","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"x_vendor":{"keep":[1,2]},"messages":[{"role":"system","content":"知识与声明契约"},{"role":"user","content":"分析这局录像。"}]}`

// setup builds an exchange whose draft was answered and validated, as the proxy
// and the validate interceptor leave it.
type setup struct {
	cfg      *Config
	opts     Options
	draft    string
	rules    map[string]rule
	replies  []reply
	injected bool
	noUp     bool
}

type fixture struct {
	r   *Revise
	ex  *interceptors.Exchange
	up  *fakeUpstream
	val *fakeValidator
	reg *prometheus.Registry
}

func newFixture(t *testing.T, s setup) *fixture {
	t.Helper()
	ra3, _ := packs(t)
	reg := prometheus.NewRegistry()
	opts := s.opts
	if s.injected {
		opts.ContractInjected = func(*interceptors.Exchange) bool { return true }
	}
	r, err := New(s.cfg, interceptors.Deps{Route: "ra3", Pack: ra3, Metrics: reg}, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	val := newFakeValidator(t, s.rules)
	up := &fakeUpstream{replies: s.replies}
	draftUsage := usage(1000, 100)
	ex := &interceptors.Exchange{
		Route:      "ra3",
		Body:       []byte(originalRequest),
		Response:   &interceptors.Response{Status: 200, Body: completion(s.draft, draftUsage)},
		Validators: []interceptors.AnswerValidator{val},
		Usage:      draftUsage,
		Trace:      interceptors.NewTrace("ra3"),
	}
	if !s.noUp {
		ex.Upstream = up
	}
	ex.Issues, _ = ex.ValidateAnswer(context.Background(), s.draft)
	ex.DraftIssues = ex.Issues
	return &fixture{r: r, ex: ex, up: up, val: val, reg: reg}
}

func (f *fixture) run(t *testing.T) {
	t.Helper()
	if err := f.r.OnResponse(context.Background(), f.ex); err != nil {
		t.Fatalf("OnResponse: %v", err)
	}
}

func (f *fixture) header(name string) string {
	for _, h := range f.ex.ResponseHeaders {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

func (f *fixture) outcome() string {
	var o string
	f.ex.Trace.Do(func(t *interceptors.Trace) {
		if t.Final != nil {
			o = t.Final.Outcome
		}
	})
	return o
}

// parseUnits reads the unit claims of content.
func parseUnits(t *testing.T, content string) []claims.UnitClaim {
	t.Helper()
	ra3, _ := packs(t)
	p, err := claims.NewParser(ra3.Claims, ra3.Facts.Evidence)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Parse(content, claims.Optional)
	if !c.Usable() {
		t.Fatalf("no usable claims block in:\n%s", content)
	}
	return c.UnitClaims
}

// metric returns the value of the counter or histogram count of family name whose
// label has value.
func (f *fixture) metric(name, label, value string) float64 {
	mfs, err := f.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					if h := m.GetHistogram(); h != nil {
						return float64(h.GetSampleCount())
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

var errBoom = errors.New("connection reset by peer")

func contains(s, sub string) bool { return strings.Contains(s, sub) }
