package reqcontext

import (
	"context"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// BenchmarkResolveLargeReplay measures the context stage on a request carrying the
// 17,797-line operation log (862 KB): finding the user texts, reading their heads,
// the pack's header rules, and the resolution.
func BenchmarkResolveLargeReplay(b *testing.B) {
	benchResolve(b, "allied_vs_soviet.large.txt")
}

// benchResolve runs the context stage on a request carrying the named replay, its
// buffers released as the proxy releases them.
func benchResolve(b *testing.B, name string) {
	r := newResolver(b, nil)
	body := chatBody(b, replay(b, name), `"temperature":0.3`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ex := &interceptors.Exchange{Body: body}
		if err := r.OnRequest(context.Background(), ex); err != nil {
			b.Fatal(err)
		}
		ex.Release()
	}
}

// BenchmarkUserTextsLargeReplay measures collecting the full user texts (what the
// facts stage needs) from the same request.
func BenchmarkUserTextsLargeReplay(b *testing.B) {
	body := chatBody(b, replay(b, "allied_vs_soviet.large.txt"), "")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if len(UserTexts(body)) != 1 {
			b.Fatal("no user text")
		}
	}
}

// BenchmarkResolveProseNotAnAnalysis measures the context stage's worst case for
// the pack's apply rules: a user message of 300 lines of prose, none an operation
// or a header, so every rule reads its whole bounded scan (200 lines).
func BenchmarkResolveProseNotAnAnalysis(b *testing.B) {
	r := newResolver(b, nil)
	prose := strings.Repeat("Please summarise the meeting notes below in three bullet points, keeping names.\n", 300)
	body := chatBody(b, prose, `"temperature":0.3`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ex := &interceptors.Exchange{Body: body}
		if err := r.OnRequest(context.Background(), ex); err != nil {
			b.Fatal(err)
		}
		if c, _ := FromExchange(ex); c.Applies.Domain {
			b.Fatal("prose judged an analysis")
		}
	}
}

// BenchmarkResolveSampleReplay is BenchmarkResolveLargeReplay on the 24 KB sample
// replay of factgate bench's validate mode: the context stage's cost per request
// on the validating route, its buffers released as the proxy releases them.
func BenchmarkResolveSampleReplay(b *testing.B) {
	benchResolve(b, "allied_vs_soviet.txt")
}
