package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gate stands between the proxy and the mock upstream and holds back the
// requests hold picks: each is announced on seen, then waits for release before
// the mock gets it. The others pass at once.
type gate struct {
	url     string // the proxy's base_url: the gate, with the mock's path
	target  atomic.Pointer[url.URL]
	seen    chan struct{}
	release chan struct{}
}

func newGate(t *testing.T, hold func(body []byte) bool) *gate {
	t.Helper()
	g := &gate{seen: make(chan struct{}, 4), release: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = g.target.Load().Scheme, g.target.Load().Host
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if hold(body) {
			g.seen <- struct{}{}
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	g.url = srv.URL + "/v1"
	return g
}

// to points the gate at the mock.
func (g *gate) to(t *testing.T, mockURL string) {
	u, err := url.Parse(mockURL)
	if err != nil {
		t.Fatal(err)
	}
	g.target.Store(u)
}

// withHeldCommit makes every held stream send its headers when commit fires
// instead of after keepalive_interval.
func withHeldCommit(commit <-chan time.Time) Option {
	return func(s *Server) error {
		s.heldCommit = func() <-chan time.Time { return commit }
		return nil
	}
}

// TestHeldStreamHeadersSayWhatIsKnown: a held stream's headers carry what is
// known when they go out — the draft's upstream headers when it has answered,
// the overhead so far — and the rest follows as comments before [DONE]. The test
// decides the order of events (gate, withHeldCommit): no timer races.
func TestHeldStreamHeadersSayWhatIsKnown(t *testing.T) {
	t.Parallel()
	script := `
rules:
  - name: revision
    match: {has_assistant: true}
    answer: {content: ` + yamlString(storyFixedAnswer) + `, headers: {x-request-id: req-revision}}
  - name: slow
    match: {last_user: "^slow"}
    answer: {content: ` + yamlString(storyFixedAnswer) + `, headers: {x-request-id: req-slow}}
default:
  content: ` + yamlString(storyDraftAnswer) + `
  headers: {x-request-id: req-draft, openai-processing-ms: "12"}
`
	isRevision := func(b []byte) bool { return bytes.Contains(b, []byte(`"role":"assistant"`)) }
	// An analysis, so that the answer is held (a request the pack is not about
	// is relayed live).
	isSlow := func(b []byte) bool { return bytes.Contains(b, []byte(`slow, please`)) && !isRevision(b) }
	for _, tc := range []struct {
		name, user, requestID, late string
		// hold is the upstream call the gate holds; the headers go out once it
		// reached the gate, and it is released once the client has them.
		hold func([]byte) bool
	}{
		{"the draft arrived before the headers went out", analysisUser(), "req-draft", "", isRevision},
		{"the headers went out before the upstream answered", "slow, please\n" + analysisUser(), "", ": x-request-id: req-slow\n", isSlow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGate(t, tc.hold)
			commit := make(chan time.Time)
			h := newHarness(t, script, strings.ReplaceAll(heldRouteConfig("", ""), "%MOCK%", g.url), withHeldCommit(commit))
			g.to(t, h.mock.URL())
			go func() {
				<-g.seen
				close(commit)
			}()
			body, _ := json.Marshal(map[string]any{"model": "ra3-analyst", "stream": true, "messages": []map[string]string{{"role": "user", "content": tc.user}}})
			req, _ := http.NewRequest("POST", h.base+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", harnessCredential)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// The headers are out while the gate holds the upstream call.
			hdr := resp.Header
			close(g.release)
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || !strings.HasPrefix(string(raw), keepAlive) {
				t.Fatalf("%d, want a held stream that starts with a keep-alive:\n%s", resp.StatusCode, raw)
			}
			if hdr.Get("X-Factgate-Overhead") == "" || hdr.Get("X-Factgate-Trace-Id") == "" {
				t.Errorf("headers %v lack X-Factgate-Overhead or X-Factgate-Trace-Id", hdr)
			}
			if got := hdr.Get("X-Request-Id"); got != tc.requestID {
				t.Errorf("x-request-id header %q, want %q", got, tc.requestID)
			}
			text := string(raw)
			done := strings.Index(text, "data: [DONE]")
			overhead := strings.Index(text, ": X-Factgate-Overhead: ")
			if overhead < 0 || overhead > done {
				t.Errorf("the total overhead is not told before [DONE]:\n%s", text[max(0, done-400):])
			}
			if tc.late != "" && !strings.Contains(strings.ToLower(text), tc.late) {
				t.Errorf("the upstream's x-request-id is not told at the end (%q):\n%s", tc.late, text[max(0, done-400):])
			}
		})
	}
}
