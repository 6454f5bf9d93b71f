package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors"
)

// slowTraces delays every save of the store it wraps; with hang, a save waits
// until its context ends, as a save to a frozen Redis does.
type slowTraces struct {
	TraceStore
	delay time.Duration
	hang  bool
}

func (s slowTraces) SaveTrace(ctx context.Context, t *interceptors.Trace) error {
	if s.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	time.Sleep(s.delay)
	return s.TraceStore.SaveTrace(ctx, t)
}

// withSlowTraces wraps the server's trace store once it is built.
func withSlowTraces(delay time.Duration, hang bool) Option {
	return func(s *Server) error {
		s.late = append(s.late, func(s *Server) error {
			s.traces = slowTraces{TraceStore: s.traces, delay: delay, hang: hang}
			return nil
		})
		return nil
	}
}

const traceTimingScript = `
rules:
  - match: {last_user: "^slow"}
    answer: {content: "traced", latency: 400ms}
default: {content: "traced"}
`

// The trace can be fetched the moment the answer is complete, even from a store
// that takes a while (here 50 ms, far below the answer's wait for it).
func TestATraceIsReadableWhenItsAnswerIsComplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, traceTimingScript, clientConfig, WithChain("held", holdChain{}), withSlowTraces(50*time.Millisecond, false))
	for _, tc := range []struct{ name, body string }{
		{"non-stream", `{"model":"held","messages":[{"role":"user","content":"q"}]}`},
		{"quick stream", `{"model":"held","stream":true,"messages":[{"role":"user","content":"q"}]}`},
		{"held stream", `{"model":"held","stream":true,"messages":[{"role":"user","content":"slow"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 3; i++ {
				// In passthrough auth a trace belongs to the request's credential.
				req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", harnessCredential)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "traced") {
					t.Fatalf("%d %v %s", resp.StatusCode, err, b)
				}
				id := resp.Header.Get("X-Factgate-Trace-Id")
				tr, err := h.getTrace(id)
				if err != nil {
					t.Fatal(err)
				}
				tb, _ := io.ReadAll(tr.Body)
				tr.Body.Close()
				if tr.StatusCode != 200 || !strings.Contains(string(tb), `"id":"`+id+`"`) {
					t.Fatalf("trace %s fetched right after its answer: %d %s", id, tr.StatusCode, tb)
				}
			}
		})
	}
}

// A trace store that hangs does not hold the answer for the store's timeout.
func TestAHangingTraceStoreDoesNotHoldTheAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, traceTimingScript, clientConfig, WithChain("held", holdChain{}), withSlowTraces(0, true))
	for _, tc := range []struct{ name, body string }{
		{"non-stream", `{"model":"held","messages":[{"role":"user","content":"q"}]}`},
		{"held stream", `{"model":"held","stream":true,"messages":[{"role":"user","content":"slow"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp, err := http.Post(h.base+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), "traced") {
				t.Fatalf("%d %v %s", resp.StatusCode, err, b)
			}
			t.Logf("answered in %v with the trace store hanging", took)
			// The save itself is given traceSaveTimeout; the answer waits for it
			// only traceSaveWait.
			if took >= traceSaveTimeout {
				t.Fatalf("the answer waited %v for a hanging trace store", took)
			}
		})
	}
}
