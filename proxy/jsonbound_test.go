package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// deepJSONProcessEnv makes the test binary, re-executed by TestDeepJSONKeepsTheProcessAlive,
// serve as a proxy instead of running tests: a fatal stack overflow cannot be
// recovered in-process, so the proxy under attack must be a process of its own.
const deepJSONProcessEnv = "FACTGATE_TEST_DEEP_JSON_PROXY"

// deepJSONProxyConfig serves a pass-through route and the check API; bodies up to
// 64 MiB are read (checks too), so that the 16 MiB attacks reach the JSON check
// rather than the body limits. The upstream is never called: every body is refused first.
const deepJSONProxyConfig = `
server:
  max_request_body: 64MiB
  max_check_body: 64MiB
log: {access: false, level: error}
upstreams: {u: {base_url: "http://127.0.0.1:9/v1"}}
routes:
  - {name: analyst, models: [ra3-analyst], upstream: u, pack: ra3, validate: {}}
  - {name: pass, default: true, upstream: u}
`

// TestDeepJSONProxyProcess is the proxy process of TestDeepJSONKeepsTheProcessAlive;
// run on its own it does nothing.
func TestDeepJSONProxyProcess(t *testing.T) {
	if os.Getenv(deepJSONProcessEnv) != "1" {
		t.Skip("the proxy process of TestDeepJSONKeepsTheProcessAlive")
	}
	cfg, err := ParseConfig([]byte(deepJSONProxyConfig), "deep.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		os.Exit(3)
	}
	s, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "New:", err)
		os.Exit(3)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(3)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	_ = s.Serve(ln) // until the parent kills the process
	os.Exit(0)
}

// TestDeepJSONKeepsTheProcessAlive sends the bodies that killed factgate with
// "fatal error: stack overflow" (issue 10 item 1) to a proxy process: each gets a
// 400 invalid_json naming the depth limit, the chat handler answers in under a
// second of its own time (X-Factgate-Overhead; the check API has no such header,
// so its round trip is logged), the process stays alive and its peak RSS stays
// under 100 MB (not checked under the race detector, whose shadow memory adds
// to it).
func TestDeepJSONKeepsTheProcessAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 16 MiB bodies to a proxy process")
	}
	const (
		mib        = 1 << 20
		maxHandler = time.Second // the bound, for the handler's own work
		maxRSSKiB  = 100 * 1000  // 100 MB
	)
	nestedObjects := func(n int) []byte {
		b := make([]byte, 0, 6*n+1)
		for range n {
			b = append(b, `{"a":`...)
		}
		b = append(b, '1')
		return append(b, bytes.Repeat([]byte{'}'}, n)...)
	}
	openObjects := bytes.Repeat([]byte(`{"a":`), 16*mib/5)
	attacks := []struct {
		name string
		body []byte
		line string // the position the message names
	}{
		{"16 MiB of [", bytes.Repeat([]byte{'['}, 16*mib), "line 1, column 129"},
		{`16 MiB of {"a":`, openObjects, "line 1, column 641"},
		{"1.5 M nested objects", nestedObjects(1_500_000), "line 1, column 641"},
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestDeepJSONProxyProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(), deepJSONProcessEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncWriter{w: &bytes.Buffer{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				base <- "http://" + addr
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case url = <-base:
	case err := <-exited:
		t.Fatalf("the proxy process exited before listening: %v\n%s", err, head(stderr))
	case <-time.After(60 * time.Second):
		t.Fatalf("the proxy process did not listen within 60s\n%s", head(stderr))
	}

	client := &http.Client{Timeout: 60 * time.Second}
	for _, path := range []string{"/v1/chat/completions", "/factgate/v1/check"} {
		for _, a := range attacks {
			start := time.Now()
			resp, err := client.Post(url+path, "application/json", bytes.NewReader(a.body))
			if err != nil {
				select {
				case werr := <-exited:
					exited <- werr
					t.Fatalf("POST %s with %s: %v; the proxy process died (%v):\n%s", path, a.name, err, werr, head(stderr))
				case <-time.After(2 * time.Second):
				}
				t.Fatalf("POST %s with %s: %v", path, a.name, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			roundTrip := time.Since(start)
			if err != nil {
				t.Fatalf("POST %s with %s: reading the answer: %v", path, a.name, err)
			}
			msg := gjson.GetBytes(body, "error.message").Str
			if resp.StatusCode != 400 || gjson.GetBytes(body, "error.code").Str != "invalid_json" ||
				!strings.Contains(msg, "128") || !strings.Contains(msg, "server.max_json_depth") || !strings.Contains(msg, a.line) {
				t.Errorf("POST %s with %s: %d %s, want 400 invalid_json naming the depth limit of 128, server.max_json_depth and %q",
					path, a.name, resp.StatusCode, body, a.line)
			}
			// The upload of 16 MiB is in the round trip; the bound only says it ends.
			if roundTrip > 20*time.Second {
				t.Errorf("POST %s with %s: the 400 took %s", path, a.name, roundTrip)
			}
			if overhead := resp.Header.Get("X-Factgate-Overhead"); overhead != "" {
				ms, _ := strconv.ParseFloat(strings.TrimSuffix(overhead, "ms"), 64)
				if d := time.Duration(ms * float64(time.Millisecond)); d > maxHandler {
					t.Errorf("POST %s with %s: the handler took %s, want under %s", path, a.name, d, maxHandler)
				}
			}
			t.Logf("POST %s with %s (%.1f MiB): %d in %s (handler overhead %s)", path, a.name,
				float64(len(a.body))/mib, resp.StatusCode, roundTrip.Round(time.Millisecond), resp.Header.Get("X-Factgate-Overhead"))
		}
	}

	resp, err := client.Get(url + "/healthz")
	if err != nil {
		t.Fatalf("the proxy process is not answering after the attacks: %v\n%s", err, head(stderr))
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/healthz after the attacks: %d", resp.StatusCode)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Logf("no peak RSS: %v", err)
		return
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			t.Logf("peak RSS of the proxy process: %d KiB", kib)
			if raceDetector() {
				continue // the race detector's shadow memory is not the proxy's
			}
			if kib <= 0 || kib > maxRSSKiB {
				t.Errorf("peak RSS of the proxy process is %d KiB, want at most %d", kib, maxRSSKiB)
			}
		}
	}
}

// raceDetector reports a test binary built with -race.
func raceDetector() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, st := range info.Settings {
		if st.Key == "-race" {
			return st.Value == "true"
		}
	}
	return false
}

// head is the first 2,000 bytes of what a process wrote (a Go crash starts with
// the fatal error), for the test log.
func head(w *syncWriter) string {
	s := w.String()
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}

// fuzzUpstream answers every request with a clean chat completion and counts the
// requests, so that a fuzzed body that gets a 200 can be shown to have gone upstream.
func fuzzUpstream(f *testing.F) (string, *atomic.Int64) {
	f.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	var hits atomic.Int64
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"PlayerA 在 1:24 打包主基地。"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`)
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		hits.Add(1)
		rc.SetContentType("application/json")
		rc.SetBody(answer)
	}}
	go func() { _ = srv.Serve(ln) }()
	f.Cleanup(func() { _ = srv.Shutdown() })
	return "http://" + ln.Addr().String() + "/v1", &hits
}

// FuzzChatHandlerJSON feeds request bodies to the chat handler, on a pass-through
// route and on a held RA3 route: every answer is a forwarded request (a 200 the
// upstream saw) or an OpenAI error envelope that is not an internal error, and
// nothing panics (the handler recovers panics into a 500 and a log line).
func FuzzChatHandlerJSON(f *testing.F) {
	up, hits := fuzzUpstream(f)
	cfg, err := ParseConfig([]byte(`
server: {max_json_depth: 32}
log: {access: false}
upstreams: {u: {base_url: "`+up+`"}}
routes:
  - {name: analyst, models: [ra3-analyst], upstream: u, pack: ra3, inject: {}, validate: {}}
  - {name: pass, default: true, upstream: u}
`), "fuzz.yaml")
	if err != nil {
		f.Fatal(err)
	}
	logs := &syncWriter{w: &bytes.Buffer{}}
	s, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"ra3-analyst","messages":[{"role":"user","content":"Mod: default\n玩家: PlayerA (盟军)\n0:01.04 PlayerA 移动"}],"metadata":{"factgate.knowledge_set":"ra3"}}`,
		`{"model":"ra3-analyst","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}]}`,
		strings.Repeat(`{"a":`, 1000),
		strings.Repeat("[", 1000),
		`{"model":"m",`, `{"model":1}`, `[]`, ``, `"\ud800"`, "{\"model\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/v1/chat/completions")
		req.Header.SetContentType("application/json")
		req.SetBody(body)
		var rc fasthttp.RequestCtx
		rc.Init(&req, nil, nil)
		before := hits.Load()
		s.handle(&rc)
		status, out := rc.Response.StatusCode(), rc.Response.Body()
		if strings.Contains(logs.String(), "panic") {
			t.Fatalf("body %q: the handler panicked:\n%s", body, logs.String())
		}
		if status == 200 {
			if hits.Load() == before {
				t.Fatalf("body %q: 200 without a request upstream: %.300s", body, out)
			}
			return
		}
		var env struct {
			Error *struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &env); err != nil || env.Error == nil || env.Error.Message == "" || env.Error.Type == "" || env.Error.Code == nil {
			t.Fatalf("body %q: %d without an OpenAI error envelope: %.300s", body, status, out)
		}
		if status >= 500 && (*env.Error.Code == "internal_error" || *env.Error.Code == "interceptor_failed") {
			t.Fatalf("body %q: %d %s", body, status, out)
		}
		if *env.Error.Code == "invalid_json" && rawjson.Valid(body, 32) {
			t.Fatalf("body %q is JSON within the bound but got %s", body, out)
		}
	})
}

// TestJSONDepthFollowsTheConfig sets server.max_json_depth to 16: a request nested
// 16 levels deep is forwarded, one 17 levels deep gets 400 invalid_json naming the
// limit and the key without reaching the upstream, and a held answer nested deeper
// than 16 levels is a 502 upstream_bad_response (pass-through answers are relayed
// unread).
func TestJSONDepthFollowsTheConfig(t *testing.T) {
	t.Parallel()
	// The answer's extra member nests 20 arrays: 22 levels in the answer.
	deepAnswer := `default: {content: "ok", extra: {x: ` + strings.Repeat("[", 20) + "1" + strings.Repeat("]", 20) + `}}`
	config := strings.Replace(clientConfig, "server: {keepalive_interval: 100ms}", "server: {keepalive_interval: 100ms, max_json_depth: 16}", 1)
	h := newHarness(t, deepAnswer, config, WithChain("held", holdChain{}))
	nested := func(model string, levels int) string {
		// The body, messages and the message are three levels.
		return `{"model":"` + model + `","messages":[{"role":"user","content":"x","x":` +
			strings.Repeat("[", levels-3) + strings.Repeat("]", levels-3) + `}]}`
	}

	status, _, body := h.post(t, "/v1/chat/completions", nested("alias", 16))
	if status != 200 {
		t.Fatalf("16 levels: %d %s, want the pass-through answer", status, body)
	}
	seen := len(h.mock.Requests())
	status, _, body = h.post(t, "/v1/chat/completions", nested("alias", 17))
	msg := gjson.GetBytes(body, "error.message").Str
	if status != 400 || gjson.GetBytes(body, "error.code").Str != "invalid_json" ||
		!strings.Contains(msg, "16 levels") || !strings.Contains(msg, "server.max_json_depth") || !strings.Contains(msg, "line 1, column 76") {
		t.Fatalf("17 levels: %d %s, want 400 invalid_json naming 16 levels at line 1, column 76 and server.max_json_depth", status, body)
	}
	if n := len(h.mock.Requests()); n != seen {
		t.Fatalf("a request refused as too deep reached the upstream (%d requests, %d before)", n, seen)
	}

	for _, stream := range []string{"false", "true"} {
		status, _, body = h.post(t, "/v1/chat/completions", `{"model":"held","stream":`+stream+`,"messages":[{"role":"user","content":"x"}]}`)
		msg = gjson.GetBytes(body, "error.message").Str
		if status != 502 || gjson.GetBytes(body, "error.code").Str != "upstream_bad_response" ||
			!strings.Contains(msg, "16 levels") || !strings.Contains(msg, "server.max_json_depth") {
			t.Fatalf("held answer 22 levels deep, stream=%s: %d %s, want 502 upstream_bad_response naming the limit", stream, status, body)
		}
	}
}

// TestLiveReasoningEventsAreBounded: each event of a stream whose reasoning is
// forwarded live is checked to server.max_json_depth before gjson reads it.
func TestLiveReasoningEventsAreBounded(t *testing.T) {
	t.Parallel()
	a := &streamAssembly{maxDepth: 16}
	event := `{"choices":[{"index":0,"delta":{"content":"x","x":` + strings.Repeat("[", 1<<20)
	_, err := a.event([]byte(event))
	if !errors.Is(err, errMalformedAnswer) || !strings.Contains(fmt.Sprint(err), "16 levels") {
		t.Fatalf("a deep event: %v, want an upstream_bad_response naming the limit", err)
	}
	if e := upstreamError("u", fmt.Errorf("reading the upstream's event stream: %w", err)); e.Code != "upstream_bad_response" || e.Status != 502 {
		t.Fatalf("a deep event maps to %d %s", e.Status, e.Code)
	}
	if _, err := a.event([]byte(`{"choices":[{"index":0,"delta":{"content":"x"}}]}`)); err != nil {
		t.Fatalf("a shallow event: %v", err)
	}
}
