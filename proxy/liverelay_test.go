package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/factgate/factgate/interceptors"
)

// Issue 27, item 3: on a held route, a streamed request the pack is not about (a
// greeting, a JSON-mode call, a tool step) is relayed live, as on a route
// without interceptors: its first token comes when the upstream sends it, its
// events byte for byte, with factgate's headers, trace, usage and metrics.

// pacedScript streams every answer in 4-rune pieces 40 ms apart (about 1 s for
// the greeting), so that a held answer and a live one are told apart by when
// the first token arrives.
var pacedScript = `
rules:
  - match: {response_format: json_object}
    answer: {content: '{"greeting":"hello there, how are you doing today?"}', chunk_size: 4, chunk_delay: 40ms, paced: true}
  - match: {has_assistant: true, any_message: "temp"}
    answer:
      tool_calls: [{id: call_2, function: {name: get_forecast, arguments: '{"city":"Paris","days":3}'}}]
      chunk_size: 4
      chunk_delay: 40ms
      paced: true
  - match: {last_user: "PlayerA"}
    answer: {content: ` + yamlString(storyFixedAnswer) + `, chunk_size: 4, chunk_delay: 40ms, paced: true}
default:
  content: "Hello there! A greeting streamed in small pieces, slowly."
  chunk_size: 4
  chunk_delay: 40ms
  paced: true
`

// timedStream is a stream read as it arrives.
type timedStream struct {
	status     int
	header     http.Header
	body       string
	firstToken time.Duration // until the first event with content or arguments
	total      time.Duration
}

// readTimed posts body to url and reads the event stream, timing its first token.
func readTimed(t *testing.T, url, body string) timedStream {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", harnessCredential)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := timedStream{status: resp.StatusCode, header: resp.Header}
	r := bufio.NewReader(resp.Body)
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if out.firstToken == 0 && strings.HasPrefix(line, "data:") {
			d := gjson.Parse(strings.TrimSpace(strings.TrimPrefix(line, "data:")))
			if d.Get("choices.0.delta.content").Str != "" || d.Get("choices.0.delta.tool_calls.0.function.arguments").Str != "" || d.Get("delta").Str != "" {
				out.firstToken = time.Since(start)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	out.total = time.Since(start)
	out.body = b.String()
	return out
}

// sameEvents normalizes what differs between two runs of one answer (the
// created clock) so that two streams can be compared byte for byte.
var createdField = regexp.MustCompile(`"created(_at)?":\d+`)

func sameEvents(s string) string { return createdField.ReplaceAllString(s, `"created$1":0`) }

func TestHeldRouteRelaysWhatThePackIsNotAboutLive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pacedScript, heldRouteConfig("", ""))
	tool := `{"model":"%s","stream":true,"tools":[{"type":"function","function":{"name":"get_forecast","parameters":{"type":"object"}}}],` +
		`"messages":[{"role":"user","content":"weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":18}"}]}`
	for _, tc := range []struct{ name, body string }{
		{"a greeting", `{"model":"%s","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}],"temperature":0.5}`},
		{"a JSON-mode call", `{"model":"%s","stream":true,"response_format":{"type":"json_object"},"messages":[{"role":"system","content":"Answer in JSON."},{"role":"user","content":"Greet me"}]}`},
		{"a tool step", tool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.mock.Reset()
			direct := readTimed(t, h.mock.URL()+"/chat/completions", fmt.Sprintf(tc.body, "deepseek-chat"))
			h.mock.Reset()
			held := readTimed(t, h.base+"/v1/chat/completions", fmt.Sprintf(tc.body, "ra3-analyst"))
			if held.status != 200 || direct.status != 200 {
				t.Fatalf("status %d (direct %d): %s", held.status, direct.status, held.body)
			}
			t.Logf("first token: direct %v, through the held route %v (whole stream %v)", direct.firstToken, held.firstToken, direct.total)
			// Generous: the first token within half the stream's duration of the
			// direct one (a held answer gets it after the whole stream).
			if held.firstToken == 0 || held.firstToken > direct.firstToken+direct.total/2 {
				t.Errorf("the first token came after %v through the held route, %v direct: the answer was held, not relayed", held.firstToken, direct.firstToken)
			}
			if sameEvents(held.body) != sameEvents(direct.body) {
				t.Errorf("the events differ from the upstream's:\n got %s\nwant %s", held.body, direct.body)
			}
			if held.header.Get("X-Factgate-Trace-Id") == "" || held.header.Get(HeaderUpstream) != "mock" {
				t.Errorf("headers %v: want the trace id and the upstream", held.header)
			}
			// The trace is stored before the stream's last bytes.
			resp, err := h.getTrace(held.header.Get("X-Factgate-Trace-Id"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("the trace right after the stream: %d %s", resp.StatusCode, b)
			}
			if tc.name == "a greeting" && gjson.GetBytes(b, "usage.total_tokens").Int() == 0 {
				t.Errorf("the trace has no usage: %s", b)
			}
			if recs := h.mock.Requests(); len(recs) != 1 || !gjson.GetBytes(recs[0].Body, "stream").Bool() {
				t.Errorf("the upstream got %d requests, the last not streamed", len(recs))
			}
		})
	}
}

// TestARelayedStreamIsCountedAsAnyOther: the A/B experiment counts a request
// relayed live, its tokens from the usage factgate asked the upstream for — and
// the client, which did not ask for the usage, gets no usage chunk.
func TestARelayedStreamIsCountedAsAnyOther(t *testing.T) {
	t.Parallel()
	h := newABHarness(t, false, "")
	status, hdr, raw := h.post(t, "/v1/chat/completions", `{"model":"ra3-analyst","stream":true,"user":"greeter-1","messages":[{"role":"user","content":"Say hello"}]}`)
	if status != 200 || hdr.Get("X-Factgate-Variant") == "" {
		t.Fatalf("%d %v %s", status, hdr, raw)
	}
	events, _, err := readStrictSSE(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if strings.Contains(ev.Data, `"usage"`) {
			t.Errorf("the client did not ask for the usage and got it: %s", ev.Data)
		}
	}
	if up := h.lastRequest(t).Body; !gjson.GetBytes(up, "stream_options.include_usage").Bool() || !gjson.GetBytes(up, "stream").Bool() {
		t.Errorf("the upstream was not asked for a stream with its usage: %s", up)
	}
	v := abVariant(abReport(t, h.base, 1), hdr.Get("X-Factgate-Variant"))
	if v.Requests != 1 || v.Outcomes["unvalidated"] != 1 || v.Tokens.Total != 1000 || v.Tokens.Draft != 1000 {
		t.Errorf("variant %s: requests %d outcomes %v tokens %+v, want one unvalidated request of 1000 tokens", v.Name, v.Requests, v.Outcomes, v.Tokens)
	}
	m := metricsText(t, h)
	if !strings.Contains(m, `factgate_requests_total{code="200",route="ra3"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(m, "factgate_requests_total"))
	}
}

func TestResponsesStreamRelayedLiveOnAResponsesUpstream(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pacedScript, responsesConfig)
	body := `{"model":"%s","stream":true,"input":"Say hello"}`
	h.mock.Reset()
	direct := readTimed(t, h.mock.URL()+"/responses", fmt.Sprintf(body, "gpt-5"))
	h.mock.Reset()
	held := readTimed(t, h.base+"/v1/responses", fmt.Sprintf(body, "ra3-r"))
	t.Logf("first token: direct %v, through the held route %v (whole stream %v)", direct.firstToken, held.firstToken, direct.total)
	if held.status != 200 || held.firstToken == 0 || held.firstToken > direct.firstToken+direct.total/2 {
		t.Fatalf("%d: the first token came after %v through the held route, %v direct", held.status, held.firstToken, direct.firstToken)
	}
	// The same events, but for the model the route answers with (response_model
	// alias).
	want := strings.ReplaceAll(sameEvents(direct.body), `"model":"gpt-5"`, `"model":"ra3-r"`)
	if got := sameEvents(held.body); got != want {
		t.Errorf("the events differ from the upstream's:\n got %s\nwant %s", got, want)
	}
	events, _, err := readStrictSSE(held.body)
	if err != nil || events[len(events)-1].Name != "response.completed" {
		t.Fatalf("%v %v", err, events)
	}
}

// TestARelayedStreamEndsAsItsClientOrItsUpstreamEndIt: a client that leaves a
// relayed stream cancels the upstream call and is logged as 499; an upstream
// that breaks off leaves the client a broken stream and is logged as 502
// upstream_stream_broken — as on a route without interceptors.
func TestARelayedStreamEndsAsItsClientOrItsUpstreamEndIt(t *testing.T) {
	t.Parallel()
	t.Run("the client leaves", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, pacedScript, strings.Replace(heldRouteConfig("", ""), "log: {level: warn}", "log: {level: info}", 1))
		req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", strings.NewReader(`{"model":"ra3-analyst","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("%q %v", line, err)
		}
		resp.Body.Close()
		recs, err := h.mock.WaitFor(1, 5*time.Second)
		if err != nil || !recs[0].Cancelled {
			t.Errorf("the upstream call was not cancelled: %v %+v", err, recs)
		}
		waitForLog(t, h, `"status":499`)
		if m := metricsText(t, h); !strings.Contains(m, `factgate_requests_total{code="499",route="ra3"} 1`) {
			t.Errorf("metrics:\n%s", grepLines(m, "factgate_requests_total"))
		}
	})
	t.Run("the upstream breaks off", func(t *testing.T) {
		t.Parallel()
		up := rawUpstream(t, func(c net.Conn) {
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			ev := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
			_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(ev), ev)
			reset(c)
		})
		config := strings.Replace(strings.ReplaceAll(heldRouteConfig("", ""), "%MOCK%", up), "log: {level: warn}", "log: {level: info}", 1)
		h := newHarness(t, "", config)
		resp, err := http.Post(h.base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"ra3-analyst","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err == nil || !strings.Contains(string(b), `"Hel"`) {
			t.Fatalf("want 200, the event and a broken body: %d %v %q", resp.StatusCode, err, b)
		}
		waitForLog(t, h, `"error":"upstream_stream_broken"`)
		if m := metricsText(t, h); !strings.Contains(m, `factgate_requests_total{code="502",route="ra3"} 1`) {
			t.Errorf("metrics:\n%s", grepLines(m, "factgate_requests_total"))
		}
	})
}

// slowRequestPhase holds the request phases until released: the held stream's
// headers go out (keep-alives) before the chain decides to relay.
type slowRequestPhase struct{ release chan struct{} }

func (slowRequestPhase) Name() string { return "slow" }
func (p slowRequestPhase) OnRequest(ctx context.Context, _ *interceptors.Exchange) error {
	select {
	case <-p.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestARelayIsDecidedBeforeAHeldStreamCommits: request phases that outlast the
// keep-alive interval do not commit a held stream for an answer relayed live:
// the client gets the upstream's headers and events, as on a route without
// interceptors, with no keep-alive before them.
func TestARelayIsDecidedBeforeAHeldStreamCommits(t *testing.T) {
	t.Parallel()
	commit := make(chan time.Time)
	close(commit) // the keep-alive interval has passed at once
	phase := slowRequestPhase{release: make(chan struct{})}
	script := `default: {content: "Hello there!", headers: {x-request-id: req-live}}`
	h := newHarness(t, script, clientConfig, WithChain("held", phase), withHeldCommit(commit))
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(phase.release)
	}()
	status, hdr, raw := h.post(t, "/v1/chat/completions", `{"model":"held","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 || !strings.HasPrefix(string(raw), "data: ") {
		t.Fatalf("%d, want the upstream's events from the first byte:\n%q", status, raw)
	}
	_, content, events := readSSE(t, strings.NewReader(string(raw)))
	if content != "Hello there!" || events[len(events)-1] != "[DONE]" {
		t.Fatalf("content %q events %v", content, events)
	}
	if hdr.Get("X-Request-Id") != "req-live" || hdr.Get("X-Factgate-Trace-Id") == "" {
		t.Errorf("headers %v: want the upstream's and the trace id", hdr)
	}
}

// TestARelayedStreamIsTracedAsItsCall: with OpenTelemetry on, the upstream call
// of a stream a held route relays live is a call span that reads the stream (its
// usage and finish reasons) and ends with it.
func TestARelayedStreamIsTracedAsItsCall(t *testing.T) {
	t.Parallel()
	h, exp := tracedHarness(t, pacedScript, heldRouteConfig("", "")+"telemetry: {enabled: true}\n")
	status, _, body := h.post(t, "/v1/chat/completions", `{"model":"ra3-analyst","stream":true,"messages":[{"role":"user","content":"Say hello"}]}`,
		"traceparent", "00-"+clientTraceID+"-00f067aa0ba902b7-01")
	if status != 200 || !strings.Contains(string(body), "[DONE]") || strings.Contains(string(body), `"usage"`) {
		t.Fatalf("status %d: %s", status, body)
	}
	spans := spansOf(t, h, exp, clientTraceID)
	var call *tracetest.SpanStub
	for i, s := range spans {
		if attrString(s, "factgate.call.kind") != "" {
			call = &spans[i]
		}
	}
	if call == nil {
		t.Fatalf("no call span among %v", names(spans))
	}
	if attrString(*call, "gen_ai.response.finish_reasons") != `["stop"]` || attrString(*call, "gen_ai.usage.output_tokens") == "" || call.EndTime.IsZero() {
		t.Errorf("the relayed call's span: %v", call.Attributes)
	}
}
