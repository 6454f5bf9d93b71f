package inject

import (
	"context"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
)

// benchInject measures the inject stage alone on a resolved request whose prompt is
// already cached: locating the messages, merging the client's system message, and
// splicing the cached JSON into a new body.
func benchInject(b *testing.B, body []byte) {
	in := newInjector(b, &Config{RouteValidates: true}, "ra3")
	ex := resolved(b, "ra3", append([]byte(nil), body...))
	body = ex.Body
	c, _ := reqcontext.FromExchange(ex)
	run(b, in, ex) // fills the cache
	sys, _ := systemMessages(ex.Body)
	b.ReportMetric(float64(len(sys[0])), "prompt-bytes")
	ex = &interceptors.Exchange{Trace: interceptors.NewTrace("bench")}
	reqcontext.Store(ex, c)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ex.Body = body
		ex.Trace.Notes = ex.Trace.Notes[:0]
		if err := in.OnRequest(context.Background(), ex); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInjectCached2KB is the target: a 2 KB request (a client system
// message and a user message with an operation log header) on a cached render.
func BenchmarkInjectCached2KB(b *testing.B) {
	log := replay(b, "corona_celestial_vs_allied.txt")
	for len(log) > 1700 {
		log = log[:strings.LastIndexByte(log, '\n')]
	}
	body := []byte(`{"model":"ra3-analyst","temperature":0.3,"messages":[{"role":"system","content":"你是录像分析助手，回答要简短。"},{"role":"user","content":` + jsonString(log) + `}]}`)
	if len(body) < 1800 || len(body) > 2300 {
		b.Fatalf("body is %d bytes, want about 2 KB", len(body))
	}
	benchInject(b, body)
}

// BenchmarkInjectCachedFullReplay is the same on a request carrying the whole
// 23 KB sample replay.
func BenchmarkInjectCachedFullReplay(b *testing.B) {
	body := []byte(`{"model":"ra3-analyst","messages":[{"role":"system","content":"你是录像分析助手。"},{"role":"user","content":` + jsonString(replay(b, "allied_vs_soviet.txt")) + `}]}`)
	benchInject(b, body)
}

// BenchmarkInjectUncached measures composing a prompt on a cache miss (the
// knowledge render itself is cached by the library's renderer).
func BenchmarkInjectUncached(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"Mod: corona\n玩家: 青龙 (神州); Blue (盟军)"}]}`)
	ex := resolved(b, "ra3", body)
	c, _ := reqcontext.FromExchange(ex)
	b.ReportAllocs()
	for b.Loop() {
		in := newInjector(b, &Config{RouteValidates: true}, "ra3")
		ex := &interceptors.Exchange{Body: body, Trace: interceptors.NewTrace("bench")}
		reqcontext.Store(ex, c)
		if err := in.OnRequest(context.Background(), ex); err != nil {
			b.Fatal(err)
		}
	}
}
