package abtest

import (
	"context"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// The experiment's request phase runs on every request of its route: assignment
// (one SHA-256 per variant) and the variant's body edits.
func BenchmarkAssign(b *testing.B) {
	e := newExperiment(b, `
name: bench
control: a
variants:
  - {name: a, weight: 50}
  - {name: b, weight: 30, temperature: 0.2, model: deepseek-reasoner}
  - {name: c, weight: 20, sampling: {presence_penalty: 0.5}}
`)
	body := []byte(`{"model":"ra3-analyst","user":"alice","messages":[{"role":"system","content":"你是录像分析助手。"},{"role":"user","content":"分析这局录像。"}],"temperature":1}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ex := &interceptors.Exchange{Body: body, Trace: &interceptors.Trace{}}
		if err := e.OnRequest(ctx, ex); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPickBySubject(b *testing.B) {
	e := newExperiment(b, twoVariants)
	b.ReportAllocs()
	for b.Loop() {
		e.pickBySubject("user-00000000deadbeef")
	}
}

// The response phase: reading the outcome and building the counter increments
// (the cache write itself runs in the background).
func BenchmarkObserve(b *testing.B) {
	ex := &interceptors.Exchange{
		Response:    &interceptors.Response{Status: 200, Body: []byte(`{"usage":{"total_tokens":100}}`)},
		Validators:  []interceptors.AnswerValidator{noValidator{}},
		DraftIssues: issues(interceptors.Contradiction, interceptors.Warning),
		Trace:       &interceptors.Trace{Final: &interceptors.FinalOutcome{Outcome: OutcomeResolved}, Attempts: []interceptors.Attempt{{Kind: "draft"}, {Kind: "revision"}}},
		Revisions:   1,
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = observe(ex, 1234).deltas()
	}
}
