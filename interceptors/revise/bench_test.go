package revise

import (
	"context"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// BenchmarkAcceptedDraft is what every validated request with a clean draft pays
// in this step: no call, headers, trace, metrics.
func BenchmarkAcceptedDraft(b *testing.B) {
	ra3, _ := packs(b)
	r, err := New(nil, interceptors.Deps{Route: "bench", Pack: ra3}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	draft := answer("PlayerA 在 1:24 打包主基地。", base)
	resp := completion(draft, usage(1, 1))
	val := newFakeValidator(b, storyRules)
	b.ReportAllocs()
	for b.Loop() {
		ex := &interceptors.Exchange{Body: []byte(originalRequest), Response: &interceptors.Response{Status: 200, Body: resp},
			Validators: []interceptors.AnswerValidator{val}, Trace: interceptors.NewTrace("bench")}
		if err := r.OnResponse(context.Background(), ex); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcceptedDraftWithAWeakClaim is an accepted draft whose claim is
// downgraded for free (downgrade below_threshold): the claims block edited, the
// edited answer validated again (here by a fake validator), the notice rendered
// and placed after the text.
func BenchmarkAcceptedDraftWithAWeakClaim(b *testing.B) {
	ra3, _ := packs(b)
	r, err := New(nil, interceptors.Deps{Route: "bench", Pack: ra3}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	draft := answer("587 确认是基地车；246 在 1:24 打包。", mcv, base)
	resp := completion(draft, usage(1, 1))
	val := newFakeValidator(b, storyRules)
	issues, _ := val.ValidateAnswer(context.Background(), nil, draft)
	b.ReportAllocs()
	for b.Loop() {
		ex := &interceptors.Exchange{Body: []byte(originalRequest), Response: &interceptors.Response{Status: 200, Body: resp},
			Validators: []interceptors.AnswerValidator{val}, Trace: interceptors.NewTrace("bench"), Issues: issues, DraftIssues: issues}
		if err := r.OnResponse(context.Background(), ex); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRevisionRequest renders and builds one revision request of the seed's
// story (issues with facts, the pack's template, the sjson body).
func BenchmarkRevisionRequest(b *testing.B) {
	ra3, _ := packs(b)
	r, err := New(nil, interceptors.Deps{Route: "bench", Pack: ra3}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	val := newFakeValidator(b, storyRules)
	issues, _ := val.ValidateAnswer(context.Background(), nil, storyDraft)
	ru := &run{r: r, cfg: r.cfg}
	basis := &attempt{content: storyDraft, issues: issues}
	b.ReportAllocs()
	for b.Loop() {
		turn, err := r.pack.RenderRevision(ru.revisionData(basis))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := revisionBody([]byte(originalRequest), storyDraft, turn); err != nil {
			b.Fatal(err)
		}
	}
}
