package interceptors

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// TestNewTraceRoom: a trace from NewTrace, which has room for its first notes,
// its first attempt and its first upstream try, keeps every one when more come,
// and encodes as a trace built without that room. What the room saves is
// reported by BenchmarkNewTrace.
func TestNewTraceRoom(t *testing.T) {
	fill := func(tr *Trace, notes, attempts, tries int) {
		for i := range notes {
			tr.Note(fmt.Sprintf("note %d", i))
		}
		for i := range attempts {
			tr.AddAttempt(Attempt{Kind: KindDraft, Choice: i, Counts: "0"})
		}
		for i := range tries {
			tr.AddUpstreamAttempt(UpstreamAttempt{Upstream: fmt.Sprint("u", i), Outcome: "ok"})
		}
	}

	for _, n := range []struct{ notes, attempts, tries int }{{0, 0, 0}, {1, 1, 1}, {traceNoteRoom, 1, 1}, {traceNoteRoom + 3, 3, 4}} {
		tr := NewTrace("chat")
		fill(tr, n.notes, n.attempts, n.tries)
		plain := &Trace{ID: tr.ID, Route: tr.Route, Started: tr.Started}
		fill(plain, n.notes, n.attempts, n.tries)
		got, err := tr.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%+v: NewTrace encodes %s", n, firstDifference(got, want))
		}
		if len(tr.Notes) != n.notes || len(tr.Attempts) != n.attempts || len(tr.UpstreamAttempts) != n.tries {
			t.Errorf("%+v: kept %d notes, %d attempts, %d tries", n, len(tr.Notes), len(tr.Attempts), len(tr.UpstreamAttempts))
		}
		if n.notes > 0 && tr.Notes[n.notes-1] != fmt.Sprintf("note %d", n.notes-1) {
			t.Errorf("%+v: last note %q", n, tr.Notes[n.notes-1])
		}
		compareTraceJSON(t, tr)
	}
}

// BenchmarkNewTrace reports what a trace from NewTrace allocates alone and with
// the notes, the attempt and the upstream try its room is for (the same, while
// the room holds them).
func BenchmarkNewTrace(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewTrace("chat")
		}
	})
	b.Run("filled", func(b *testing.B) {
		b.ReportAllocs()
		note := "context: knowledge set ra3"
		for b.Loop() {
			tr := NewTrace("chat")
			for range traceNoteRoom {
				tr.Note(note)
			}
			tr.AddAttempt(Attempt{Kind: KindDraft})
			tr.AddUpstreamAttempt(UpstreamAttempt{Upstream: "openai", Outcome: "ok"})
		}
	})
}

// TestNewTraceStarted: NewTrace stamps the time it starts and a fresh id.
func TestNewTraceStarted(t *testing.T) {
	t.Parallel()
	before := time.Now()
	a, b := NewTrace("chat"), NewTrace("chat")
	if a.Started.Before(before) || a.Route != "chat" || len(a.ID) != 32 || a.ID == b.ID {
		t.Errorf("NewTrace: %q %q %v", a.ID, b.ID, a.Started)
	}
}

// TestTraceJSON: a trace encodes as GET /factgate/v1/traces/{id} documents it
// (docs/revision.md): members by their snake_case names in declaration order,
// durations in milliseconds with a fraction, severities by name, times in RFC
// 3339, empty optional members left out, and HTML characters escaped.
func TestTraceJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		trace *Trace
		want  string
	}{
		{
			desc:  "a bare trace",
			trace: &Trace{ID: "abc", Route: "chat", Started: time.Date(2026, 12, 7, 23, 5, 1, 500, time.UTC)},
			want:  `{"id":"abc","route":"chat","started":"2026-12-07T23:05:01.0000005Z","usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`,
		},
		{
			desc: "a validated answer",
			trace: &Trace{
				ID: "abc", TraceParent: "00-abc-01-01", Route: "chat", Variant: "b",
				Started: time.Date(2026, 12, 7, 23, 5, 1, 0, time.FixedZone("", 3600)),
				Owner:   "key:team", KnowledgeSet: "ra3", Scopes: map[string][]string{"maps": {"m"}, "factions": nil},
				Attempts: []Attempt{{Kind: KindDraft, Issues: []Issue{{
					Code: "unit.not_observed", Severity: Contradiction, Path: "unitClaims[0]", Message: "<no>",
					Recommendation: Recommendation{EvidenceLevel: "possible", Remove: true},
					Facts:          []FactLine{{At: 84 * time.Second, Text: "01:24 pack"}},
					Args:           map[string]string{"z": "1", "a": "2"},
				}}, Counts: "C1", RequestBytes: 10, Duration: units.Millis(1234567), Content: "x & y"}},
				Calls:            []Call{{Kind: "judge", Validator: "semantic/combat", Result: "ok", Duration: units.Millis(time.Millisecond)}},
				UpstreamAttempts: []UpstreamAttempt{{Upstream: "openai", Status: 200, Outcome: "ok", Wait: units.Millis(1500 * time.Microsecond)}},
				Final:            &FinalOutcome{Attempt: 0, Outcome: OutcomeDowngraded, Counts: "C1", Delivered: "0"},
				Downgrades:       []Downgrade{{Path: "unitClaims[0]", From: "confirmed", To: "possible", Removed: true}},
				Notice:           &Notice{Mode: "header", Text: "t", Issues: []NoticeIssue{{Code: "c", Severity: Warning, Path: "p", Heading: "weak"}}},
				Timings:          map[string]units.Millis{"validate": units.Millis(2 * time.Millisecond), "facts": 0},
				Notes:            []string{"\u2028"},
				Request:          &TraceRequest{Model: "m", Messages: []TraceMessage{{Role: "user", Content: "hi", Bytes: 2}}},
			},
			want: `{"id":"abc","traceparent":"00-abc-01-01","route":"chat","variant":"b","started":"2026-12-07T23:05:01+01:00",` +
				`"owner":"key:team","knowledge_set":"ra3","scopes":{"factions":null,"maps":["m"]},` +
				`"attempts":[{"kind":"draft","choice":0,"issues":[{"code":"unit.not_observed","severity":"Contradiction","path":"unitClaims[0]",` +
				`"message":"\u003cno\u003e","recommendation":{"evidenceLevel":"possible","remove":true},"facts":[{"at":84000000000,"text":"01:24 pack"}],` +
				`"args":{"a":"2","z":"1"}}],"counts":"C1","request_bytes":10,"duration":1.234567,` +
				`"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},"content":"x \u0026 y"}],` +
				`"calls":[{"kind":"judge","validator":"semantic/combat","result":"ok","duration":1,"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}],` +
				`"upstream_attempts":[{"upstream":"openai","status":200,"outcome":"ok","wait":1.5,"duration":0}],` +
				`"final":{"choice":0,"attempt":0,"outcome":"downgraded","counts":"C1","delivered":"0"},` +
				`"downgrades":[{"choice":0,"path":"unitClaims[0]","from":"confirmed","to":"possible","removed":true}],` +
				`"notice":{"choice":0,"mode":"header","text":"t","issues":[{"code":"c","severity":"Warning","path":"p","heading":"weak"}]},` +
				`"timings":{"facts":0,"validate":2},"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},` +
				`"notes":["\u2028"],"request":{"model":"m","messages":[{"role":"user","content":"hi","bytes":2}]}}`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := tc.trace.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("MarshalJSON:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
