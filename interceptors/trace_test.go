package interceptors

import (
	"bytes"
	"fmt"
	"testing"
	"time"
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
