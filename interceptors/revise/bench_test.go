package revise

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
)

// benchAnswerPath is the answer factgate bench's mock serves: the benchmarks read
// it where the bench embeds it, so they follow it when it changes.
const benchAnswerPath = "../../cmd/factgate/demodata/clean_answer.md"

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

// BenchmarkAcceptedBenchAnswer is the clean answer `factgate bench` serves
// (benchAnswerPath) accepted with its claims block stripped, as for a request
// whose contract the proxy injected: "located" with the block's location
// remembered as the validation step leaves it, "unlocated" without. What the validation step does before is done for batches of
// exchanges with the timer stopped.
func BenchmarkAcceptedBenchAnswer(b *testing.B) {
	ra3, _ := packs(b)
	r, err := New(nil, interceptors.Deps{Route: "bench", Pack: ra3}, Options{Strip: StripAlways})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		b.Fatal(err)
	}
	draft := string(raw)
	resp := completion(draft, usage(1, 1))
	val := newFakeValidator(b, storyRules)
	// validated returns an exchange as the validation step leaves it: the choice
	// read (the response's spans known), the draft in the trace, and with located
	// its block's location remembered.
	validated := func(located bool) *interceptors.Exchange {
		ex := &interceptors.Exchange{Body: []byte(originalRequest), Response: &interceptors.Response{Status: 200, Body: resp},
			Validators: []interceptors.AnswerValidator{val}, Trace: interceptors.NewTrace("bench")}
		if ex.Response.HasToolCalls(0) || ex.Response.ChoiceContent(0) != draft {
			b.Fatal("not the draft")
		}
		ex.Trace.AddAttempt(interceptors.Attempt{Kind: interceptors.KindDraft, Content: draft, Counts: "0"})
		if located {
			r.parser.LocateIn(claims.AttachLocations(ex), strings.Clone(draft))
		}
		return ex
	}
	for _, located := range []bool{true, false} {
		name := map[bool]string{true: "located", false: "unlocated"}[located]
		b.Run(name, func(b *testing.B) {
			batch := make([]*interceptors.Exchange, 256)
			next := len(batch)
			b.ReportAllocs()
			for b.Loop() {
				if next == len(batch) {
					b.StopTimer()
					for i := range batch {
						batch[i] = validated(located)
					}
					next = 0
					b.StartTimer()
				}
				if err := r.OnResponse(context.Background(), batch[next]); err != nil {
					b.Fatal(err)
				}
				next++
			}
		})
	}
}
