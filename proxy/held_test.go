package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestHeldAnswersReleaseEveryAnswer: the answers a request read in place go back
// to fasthttp's pool at its end, whether they fit the in-place slots or not, and
// none stays referenced to be released twice.
func TestHeldAnswersReleaseEveryAnswer(t *testing.T) {
	t.Parallel()
	var h heldAnswers
	for round := 0; round < 2; round++ {
		for range 3 {
			h.keep(fasthttp.AcquireResponse())
		}
		if len(h.resps) != 3 {
			t.Fatalf("round %d: %d answers held, want 3", round, len(h.resps))
		}
		h.release()
		if len(h.resps) != 0 || h.slots != [2]*fasthttp.Response{} {
			t.Fatalf("round %d: after release %d answers held, slots %v", round, len(h.resps), h.slots)
		}
	}
}

// TestUpstreamHeadersKeepsEndToEndOnesInOrder: a held answer's headers are the
// upstream's end-to-end ones in order, hop-by-hop ones and those its Connection
// header names left out, each name and value intact although they share one
// string.
func TestUpstreamHeadersKeepsEndToEndOnesInOrder(t *testing.T) {
	t.Parallel()
	var resp fasthttp.Response
	resp.Header.SetContentType("application/json")
	resp.Header.Set("X-Request-Id", "req-1")
	resp.Header.Set("Connection", "keep-alive, X-Hop")
	resp.Header.Set("X-Hop", "dropped")
	resp.Header.Set("Keep-Alive", "timeout=5")
	resp.Header.Set("Openai-Processing-Ms", "12")
	got := upstreamHeaders(&resp.Header)
	want := [][2]string{{"Content-Type", "application/json"}, {"X-Request-Id", "req-1"}, {"Openai-Processing-Ms", "12"}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}
