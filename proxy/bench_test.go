package proxy

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// benchUpstream is a minimal fasthttp upstream answering a fixed completion, so
// that the benchmark measures the proxy rather than the upstream.
func benchUpstream(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"PlayerA 在 1:24 打包主基地并向地图中央迁移。"},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`)
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		rc.SetContentType("application/json")
		rc.SetBody(answer)
	}}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/v1"
}

// BenchmarkPassthroughChat measures one non-streaming chat completion through the
// proxy's handler on a route with no interceptors (a 2 KB request body), including
// the loopback round trip to a minimal upstream.
func BenchmarkPassthroughChat(b *testing.B) {
	up := benchUpstream(b)
	cfg, err := ParseConfig([]byte(`
log: {access: false}
upstreams: {u: {base_url: "`+up+`"}}
routes: [{name: r, default: true, upstream: u}]
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"model":"m","temperature":0.35,"messages":[{"role":"user","content":"` + strings.Repeat("0:02.10 PlayerA 开始建造建筑 AlliedPowerPlant [UnitId]246(建造者)\\n", 28) + `"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var rc fasthttp.RequestCtx
		var req fasthttp.Request
		for pb.Next() {
			req.Reset()
			req.Header.SetMethod("POST")
			req.SetRequestURI("/v1/chat/completions")
			req.Header.SetContentType("application/json")
			req.SetBodyRaw(body)
			rc.Init(&req, nil, nil)
			s.handle(&rc)
			if rc.Response.StatusCode() != 200 {
				b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
			}
		}
	})
}
