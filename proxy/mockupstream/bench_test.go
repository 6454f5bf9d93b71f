package mockupstream

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// benchBody is a ~2 KB chat request, the size the proxy benchmarks use.
var benchBody = []byte(`{"model":"deepseek-chat","temperature":0.2,"messages":[` +
	`{"role":"system","content":"You analyse Red Alert 3 replays. Answer in Chinese."},` +
	`{"role":"user","content":"` + strings.Repeat("0:45.00 Alice 生产单位 AlliedMiner [UnitId]301(生产者)\\n", 30) + `"}]}`)

// answerText is a ~600-byte Chinese answer.
var answerText = strings.Repeat("Alice 在 1:24 打包主基地，587 可能是盟军基地车。", 12)

// benchScripts are the shapes of script the proxy's tests and benchmarks use.
var benchScripts = []struct {
	name   string
	script *Script
}{
	{name: "fixed answer", script: &Script{Rules: []Rule{
		{Name: "answer", Match: Match{Model: "deepseek-chat", HasAssistant: new(bool)}, Answer: &Answer{Content: answerText}},
	}}},
	{name: "regexp rule", script: &Script{Rules: []Rule{
		{Name: "fault", Match: Match{LastUser: "^fault:"}, Answer: &Answer{Fault: &Fault{Status: 500}}},
		{Name: "answer", Match: Match{AnyMessage: "UnitId"}, Answer: &Answer{Content: answerText}},
	}}},
	{name: "built-in echo", script: nil},
}

// discardWriter is the cheapest http.ResponseWriter, so the benchmark measures the
// handler.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) Flush()                      {}

func benchmarkHandler(b *testing.B, script *Script, body []byte) {
	s := New(Options{Script: script})
	if s.scriptErr != nil {
		b.Fatal(s.scriptErr)
	}
	req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	w := &discardWriter{h: http.Header{}}
	rd := bytes.NewReader(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset(body)
		req.Body = readCloser{rd}
		req.ContentLength = int64(len(body))
		clear(w.h)
		s.ServeHTTP(w, req)
	}
	if w.status != http.StatusOK || w.n == 0 {
		b.Fatalf("status %d, %d bytes", w.status, w.n)
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// BenchmarkHandler is the chat handler without the network, per script shape, for
// a non-stream and a stream (8-rune events) request.
func BenchmarkHandler(b *testing.B) {
	streamBody := bytes.Replace(benchBody, []byte(`"temperature"`), []byte(`"stream":true,"temperature"`), 1)
	for _, bs := range benchScripts {
		b.Run(bs.name+"/non-stream", func(b *testing.B) { benchmarkHandler(b, bs.script, benchBody) })
		b.Run(bs.name+"/stream", func(b *testing.B) { benchmarkHandler(b, bs.script, streamBody) })
	}
}

// BenchmarkLoopbackConcurrency50 drives the mock over loopback with a fasthttp client
// at concurrency 50, the shape of the proxy/direct comparison; it reports requests/s.
func BenchmarkLoopbackConcurrency50(b *testing.B) {
	s := New(Options{Script: benchScripts[0].script})
	if err := s.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	client := &fasthttp.Client{MaxConnsPerHost: 64}
	url := s.URL() + "/chat/completions"
	const workers = 50
	var next atomic.Int64
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for next.Add(1) <= int64(b.N) {
				req.SetRequestURI(url)
				req.Header.SetMethod(http.MethodPost)
				req.Header.SetContentType("application/json")
				req.SetBodyRaw(benchBody)
				if err := client.Do(req, resp); err != nil || resp.StatusCode() != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
}
