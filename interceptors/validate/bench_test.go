package validate

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// benchAnswerPath is the answer factgate bench's mock serves: the benchmarks read
// it where the bench embeds it, so they follow it when it changes.
const benchAnswerPath = "../../cmd/factgate/demodata/clean_answer.md"

// evidenceOf writes op as the structured evidence that cites it.
func evidenceOf(pack *knowledge.Pack, op *facts.Op, unit int64) string {
	parts := []string{op.Kind, interceptors.FormatClock(op.At)}
	for _, f := range pack.Facts.Evidence[op.Kind] {
		switch f {
		case fieldUnit, fieldUnits:
			parts = append(parts, strconv.FormatInt(unit, 10))
		case fieldAsset:
			parts = append(parts, op.Asset)
		case fieldPower:
			parts = append(parts, op.Power)
		case "pos":
			parts = append(parts, strconv.FormatFloat(op.Pos[0], 'f', 1, 64)+","+strconv.FormatFloat(op.Pos[1], 'f', 1, 64)+","+strconv.FormatFloat(op.Pos[2], 'f', 1, 64))
		case "player":
			parts = append(parts, op.Player)
		}
	}
	return strings.Join(parts, "|")
}

// largeAnswer builds an answer with 10 unit, 5 event and 3 timeline claims citing
// real operations of the index (two items each), at confident levels so that
// every rule runs; one citation in five is off by a second (a Contradiction).
func largeAnswer(tb testing.TB, pack *knowledge.Pack, ix *facts.Index) string {
	tb.Helper()
	var units, events, timelines []string
	n := 0
	for _, u := range ix.Units() {
		if len(units) == 10 {
			break
		}
		ops := ix.UnitOps(u, "")
		if len(ops) < 2 || ops[0].Player == "" {
			continue
		}
		ev := []string{evidenceOf(pack, ops[0], u), evidenceOf(pack, ops[len(ops)-1], u)}
		if n++; n%5 == 0 {
			ev[1] = strings.Replace(ev[1], "|", "|1", 1) // minutes 1x: not in the replay
		}
		claim := "AlliedMCV"
		if ops[0].Asset != "" {
			claim = ops[0].Asset
		}
		units = append(units, unitWith(strconv.FormatInt(u, 10), ops[0].Player, claim, "highly likely", `[]`, ev...))
	}
	all := ix.Ops()
	for i := 0; len(events) < 5; i += len(all) / 11 {
		op := &all[i]
		u := int64(0)
		if len(op.Units) > 0 {
			u = op.Units[0]
		}
		events = append(events, `{"claim":"事件 `+strconv.Itoa(i)+`","evidenceLevel":"confirmed","evidence":["`+evidenceOf(pack, op, u)+`"]}`)
	}
	for i := len(all) / 7; len(timelines) < 3; i += len(all) / 5 {
		op := &all[i]
		u := int64(0)
		if len(op.Units) > 0 {
			u = op.Units[0]
		}
		timelines = append(timelines, `{"claim":"时间线 `+strconv.Itoa(i)+`","evidenceLevel":"highly likely","evidence":["`+evidenceOf(pack, op, u)+`"]}`)
	}
	return answer(`{"unitClaims":[` + strings.Join(units, ",") + `],"eventClaims":[` + strings.Join(events, ",") + `],"timelineClaims":[` + strings.Join(timelines, ",") + `]}`)
}

// BenchmarkCheck18Claims: parse and validate an answer with 18 claims against the
// index of allied_vs_soviet.large.txt (17,797 lines). Target ≤ 200 µs.
func BenchmarkCheck18Claims(b *testing.B) {
	env := newEnv(b, Config{}, replayText(b, "allied_vs_soviet.large.txt"))
	ans := largeAnswer(b, ra3Pack(b), env.input.Index)
	issues := env.checker.Check(ans, env.input)
	b.ReportAllocs()
	for b.Loop() {
		env.checker.Check(ans, env.input)
	}
	b.ReportMetric(float64(len(issues)), "issues")
}

// BenchmarkResponsePhase: the stage's response phase on a cached index (the
// request's input resolved once, as for every attempt after the first).
func BenchmarkResponsePhase(b *testing.B) {
	v, _ := newStage(b, Config{})
	large := replayText(b, "allied_vs_soviet.large.txt")
	ex := newExchange(large)
	ctx := context.Background()
	if err := v.OnRequest(ctx, ex); err != nil {
		b.Fatal(err)
	}
	ix := v.input(ex).Index
	if !ix.HasFacts() {
		b.Fatal("no facts")
	}
	ex.Response = completion(largeAnswer(b, ra3Pack(b), ix))
	b.ReportAllocs()
	for b.Loop() {
		ex.Trace.Do(func(t *interceptors.Trace) { t.Attempts, t.Timings = nil, nil })
		ex.ResponseHeaders = ex.ResponseHeaders[:0]
		if err := v.OnResponse(ctx, ex); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckBenchAnswer: the clean answer `factgate bench` serves
// (benchAnswerPath) against its replay, allied_vs_soviet.txt.
func BenchmarkCheckBenchAnswer(b *testing.B) {
	env := newEnv(b, Config{}, replayText(b, "allied_vs_soviet.txt"))
	raw, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		b.Fatal(err)
	}
	ans := string(raw)
	issues := env.checker.Check(ans, env.input)
	b.ReportAllocs()
	for b.Loop() {
		env.checker.Check(ans, env.input)
	}
	b.ReportMetric(float64(len(issues)), "issues")
}
