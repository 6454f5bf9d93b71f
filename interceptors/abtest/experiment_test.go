package abtest

import (
	"context"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
)

func TestForcingAVariant(t *testing.T) {
	t.Parallel()
	forcing := `
name: forcing
allow_forcing: true
control: a
variants:
  - {name: a, weight: 1}
  - {name: b, weight: 1}
`
	// Subject "s-0" is hashed to variant a or b; the forced variant is the other.
	probe := newExperiment(t, forcing)
	natural := assign(t, probe, exchange(`{"model":"m","user":"s-0"}`, nil, ""))
	other := map[string]string{"a": "b", "b": "a"}[natural]

	tests := []struct {
		name    string
		allow   bool
		force   string
		variant string
		method  Method
		status  int    // an error's status; 0: none
		note    string // in the trace
	}{
		{name: "allowed: the header wins over the subject", allow: true, force: other, variant: other, method: MethodForced, note: "forced by X-Factgate-Variant"},
		{name: "allowed: an unknown variant is a 400 naming the variants", allow: true, force: "c", status: 400},
		{name: "not allowed: the header is ignored and the trace says so", allow: false, force: other, variant: natural, method: MethodSubject, note: "ignored: the route does not allow forcing"},
		{name: "not allowed: an unknown variant is ignored too", allow: false, force: "c", variant: natural, method: MethodSubject, note: `"c" ignored`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := forcing
			if !tc.allow {
				cfg = strings.Replace(cfg, "allow_forcing: true", "allow_forcing: false", 1)
			}
			e := newExperiment(t, cfg)
			ex := exchange(`{"model":"m","user":"s-0"}`, headers{"X-Factgate-Variant": tc.force}, "")
			err := e.OnRequest(context.Background(), ex)
			if tc.status != 0 {
				ie := interceptors.AsError(err)
				if ie == nil || ie.Status != tc.status || ie.Code != "unknown_variant" || ie.Param != HeaderVariant ||
					!strings.Contains(ie.Message, `no variant "c" (variants: a, b)`) {
					t.Fatalf("error %#v, want a 400 unknown_variant naming the variants", err)
				}
				if _, _, ok := Assigned(ex); ok || responseHeader(ex, HeaderVariant) != "" {
					t.Fatal("a rejected request was assigned a variant")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v, m, _ := Assigned(ex)
			if v != tc.variant || m != tc.method {
				t.Fatalf("variant %s by %s, want %s by %s", v, m, tc.variant, tc.method)
			}
			if h := responseHeader(ex, HeaderVariant); h != tc.variant {
				t.Errorf("X-Factgate-Variant: %q, want %q", h, tc.variant)
			}
			if !strings.Contains(notes(ex), tc.note) {
				t.Errorf("trace notes %q lack %q", notes(ex), tc.note)
			}
		})
	}
}

func TestTheVariantIsApplied(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: overrides
allow_forcing: true
control: baseline
variants:
  - {name: baseline, weight: 1}
  - name: strict
    weight: 1
    knowledge_set: ra3-corona
    use_custom_system_prompt: true
    custom_system_prompt: "你是严格的录像分析员。"
    additional_rules: ""
    model: deepseek-reasoner
    temperature: 0.2
    top_p: 0.9
    max_tokens: 1200
    sampling:
      presence_penalty: 0.5
      response_format: {type: json_object}
    validate: false
    max_revisions: 1
    revision_threshold: warning
    notice: header
`)
	// Unknown fields, odd spacing and key order must survive byte for byte.
	body := `{ "model" : "deepseek-chat",  "x_vendor": {"a": [1, 2.50, {"b": null}]}, "messages": [{"role":"user","content":"分析"}], "temperature": 1, "seed": 7 }`
	ex := exchange(body, headers{"X-Factgate-Variant": "strict"}, "")
	if got := assign(t, e, ex); got != "strict" {
		t.Fatalf("variant %s", got)
	}
	out := ex.Body
	for field, want := range map[string]string{
		"model": `"deepseek-reasoner"`, "temperature": "0.2", "top_p": "0.9", "max_tokens": "1200",
		"presence_penalty": "0.5", "response_format": `{"type":"json_object"}`,
		"x_vendor": `{"a": [1, 2.50, {"b": null}]}`, "seed": "7", "messages": `[{"role":"user","content":"分析"}]`,
	} {
		if got := gjson.GetBytes(out, field).Raw; got != want {
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	if !strings.Contains(string(out), `"x_vendor": {"a": [1, 2.50, {"b": null}]}, "messages"`) {
		t.Errorf("the unknown fields were re-encoded: %s", out)
	}
	if string(ex.Original) != body {
		t.Error("the client's original body was modified")
	}
	o := ex.Overrides
	switch {
	case o.Variant != "strict" || o.Experiment != "overrides":
		t.Errorf("overrides name %q / %q", o.Experiment, o.Variant)
	case o.KnowledgeSet != "ra3-corona":
		t.Errorf("knowledge set %q", o.KnowledgeSet)
	case o.CustomPrompt == nil || *o.CustomPrompt != "你是严格的录像分析员。":
		t.Errorf("custom prompt %v", o.CustomPrompt)
	case o.AdditionalRules == nil || *o.AdditionalRules != "":
		t.Errorf("additional rules %v, want an empty override (none)", o.AdditionalRules)
	case o.Validate == nil || *o.Validate:
		t.Errorf("validate %v, want false", o.Validate)
	case o.MaxRevisions == nil || *o.MaxRevisions != 1:
		t.Errorf("max_revisions %v", o.MaxRevisions)
	case o.Threshold == nil || *o.Threshold != interceptors.Warning:
		t.Errorf("threshold %v", o.Threshold)
	case o.Notice == nil || *o.Notice != "header":
		t.Errorf("notice %v, want header", o.Notice)
	}
	var traced string
	ex.Trace.Do(func(t *interceptors.Trace) { traced = t.Variant })
	if traced != "strict" || responseHeader(ex, HeaderVariant) != "strict" {
		t.Errorf("trace variant %q, header %q", traced, responseHeader(ex, HeaderVariant))
	}

	// The control sets nothing: the body is untouched and the overrides only name it.
	ex = exchange(body, headers{"X-Factgate-Variant": "baseline"}, "")
	assign(t, e, ex)
	if string(ex.Body) != body {
		t.Errorf("the control changed the body: %s", ex.Body)
	}
	if (ex.Overrides != interceptors.Overrides{Variant: "baseline", Experiment: "overrides"}) {
		t.Errorf("the control's overrides %+v", ex.Overrides)
	}
}

func TestAFailedAssignmentFallsBackToTheControl(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: fail-open
allow_forcing: true
control: a
variants:
  - {name: a, weight: 1}
  - {name: b, weight: 1, model: other-model, validate: false}
`)
	// A body whose fields cannot be set (its root is an array) must not fail the request.
	ex := exchange(`[1,2]`, headers{"X-Factgate-Variant": "b"}, "")
	if err := e.OnRequest(context.Background(), ex); err != nil {
		t.Fatalf("OnRequest failed the request: %v", err)
	}
	v, m, _ := Assigned(ex)
	if v != "a" || m != MethodFallback {
		t.Fatalf("variant %s by %s, want the control a by fallback", v, m)
	}
	if string(ex.Body) != `[1,2]` || ex.Overrides.Validate != nil || ex.Overrides.Variant != "a" {
		t.Errorf("body %s overrides %+v: the failed variant left traces", ex.Body, ex.Overrides)
	}
	if n := notes(ex); !strings.Contains(n, "assignment failed, the control a was assigned") || !strings.Contains(n, "setting the request's model") {
		t.Errorf("the trace does not say why: %q", n)
	}
	if responseHeader(ex, HeaderVariant) != "a" {
		t.Errorf("X-Factgate-Variant %q", responseHeader(ex, HeaderVariant))
	}
}

func TestResponsePhaseWithoutAssignmentDoesNothing(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, twoVariants)
	ex := exchange(`{}`, nil, "")
	ex.Response = &interceptors.Response{Status: 200, Body: []byte(`{}`)}
	if err := e.OnResponse(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	e.Wait()
	if r := e.Report(context.Background()); r.Variants[0].Requests+r.Variants[1].Requests != 0 {
		t.Fatalf("a request the experiment never assigned was counted: %+v", r.Variants)
	}
}
