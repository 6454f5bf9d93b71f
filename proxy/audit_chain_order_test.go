package proxy

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
)

// orderLog records the phases a chain ran, in order.
type orderLog struct {
	mu     sync.Mutex
	phases []string
}

func (l *orderLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phases = append(l.phases, s)
}

func (l *orderLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.phases
	l.phases = nil
	return out
}

// orderPhase records its phases; with stop set it short-circuits requests that
// carry the header X-Stop with its name, answering itself.
type orderPhase struct {
	name string
	log  *orderLog
	stop bool
}

func (p *orderPhase) Name() string { return p.name }

func (p *orderPhase) OnRequest(_ context.Context, ex *interceptors.Exchange) error {
	p.log.add("request " + p.name)
	if p.stop && string(ex.Header.Peek("X-Stop")) == p.name {
		ex.Response = &interceptors.Response{Status: 200, Body: []byte(`{"id":"local","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"answered by ` + p.name + `"},"finish_reason":"stop"}]}`)}
	}
	return nil
}

func (p *orderPhase) OnResponse(_ context.Context, ex *interceptors.Exchange) error {
	p.log.add("response " + p.name)
	return nil
}

// TestChainOrderAndShortCircuit: request phases run first to last, response phases
// last to first; a request phase that answers itself skips the later request
// phases and the upstream call, and only the response phases of the interceptors
// whose request phase ran see its answer.
func TestChainOrderAndShortCircuit(t *testing.T) {
	t.Parallel()
	log := &orderLog{}
	h := newHarness(t, `default: {content: "upstream answer"}`, clientConfig, WithChain("held",
		&orderPhase{name: "a", log: log}, &orderPhase{name: "b", log: log, stop: true}, &orderPhase{name: "c", log: log}))
	body := `{"model":"held","messages":[{"role":"user","content":"x"}]}`
	tests := []struct {
		name     string
		stop     string
		content  string
		phases   []string
		upstream int // upstream calls made
	}{
		{name: "whole chain", content: "upstream answer", upstream: 1,
			phases: []string{"request a", "request b", "request c", "response c", "response b", "response a"}},
		{name: "b answers itself", stop: "b", content: "answered by b", upstream: 0,
			phases: []string{"request a", "request b", "response b", "response a"}},
	}
	for _, tc := range tests { // sequential: they share the log and the mock's record
		before := len(h.mock.Requests())
		status, _, resp := h.post(t, "/v1/chat/completions", body, "X-Stop", tc.stop)
		if status != 200 || gjson.GetBytes(resp, "choices.0.message.content").Str != tc.content {
			t.Fatalf("%s: %d %s", tc.name, status, resp)
		}
		if got := log.take(); !slices.Equal(got, tc.phases) {
			t.Fatalf("%s: phases\n got %s\nwant %s", tc.name, strings.Join(got, ", "), strings.Join(tc.phases, ", "))
		}
		// The mock records a request once it has answered it: wait for the
		// expected calls before counting.
		if _, err := h.mock.WaitFor(before+tc.upstream, 3*time.Second); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := len(h.mock.Requests()) - before; n != tc.upstream {
			t.Fatalf("%s: %d upstream calls, want %d", tc.name, n, tc.upstream)
		}
	}
}
