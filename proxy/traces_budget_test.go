package proxy

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
)

// tracesBudgetConfig is a validating RA3 route with a small cache and a smaller
// trace tier, and a mock whose every answer is about 40 KB of text.
const tracesBudgetConfig = `
server:
  max_request_body: 4MiB
upstreams:
  mock:
    base_url: "%MOCK%"
    read_timeout: 5s
cache:
  memory:
    max_bytes: 512KiB
traces:
  memory_bytes: 256KiB
  max_bytes: 16KiB
routes:
  - name: ra3
    models: [ra3-analyst]
    upstream: mock
    pack: ra3
    validate: {}
`

// TestTracesHaveTheirOwnBudget: traces with long answer texts go to a memory tier
// of their own, so 40 of them (1.6 MB of text) leave the cache's fact index
// alone; each stored trace is cut to traces.max_bytes, keeping its attempts and
// issues and saying what was cut. Before, traces filled the cache and evicted the
// fact index.
func TestTracesHaveTheirOwnBudget(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("PlayerA 在 1:24 打包主基地并向地图中央迁移，这是一段很长的分析。\n", 500) // ~40 KB
	script, _ := json.Marshal(answer)
	h := newHarness(t, "default:\n  content: "+string(script)+"\n", tracesBudgetConfig)

	first := h.factsChat(t, factsPart(t, 1), "")
	key := h.trace(t, first.Get("X-Factgate-Trace-Id")).Get("fact_key").String()
	if key == "" {
		t.Fatal("the first trace names no fact key")
	}
	factsWaitFor(t, "the fact index in the cache", func() bool {
		_, ok, _ := h.srv.Cache().Get(context.Background(), facts.SharedKeyPrefix+key)
		return ok
	})

	// Each request is an analysis (it carries the same operation log, so the same
	// fact index), so each is validated and its trace keeps the long draft.
	log := factsPart(t, 1)
	var lastID string
	for i := range 40 {
		body, _ := json.Marshal(map[string]any{
			"model":    "ra3-analyst",
			"messages": []map[string]string{{"role": "system", "content": "问题 " + strconv.Itoa(i)}, {"role": "user", "content": log}},
		})
		status, header, resp := h.post(t, "/v1/chat/completions", string(body))
		if status != 200 {
			t.Fatalf("request %d: %d %s", i, status, resp)
		}
		lastID = header.Get("X-Factgate-Trace-Id")
	}
	tr := h.trace(t, lastID)
	if _, ok, _ := h.srv.Cache().Get(context.Background(), facts.SharedKeyPrefix+key); !ok {
		t.Errorf("40 traces evicted the fact index %s from the cache (cache.memory.max_bytes 512KiB)", key)
	}
	if n := len(tr.Raw); n > 16<<10 {
		t.Errorf("stored trace is %d bytes, over traces.max_bytes 16KiB", n)
	}
	attempts := tr.Get("attempts").Array()
	if len(attempts) == 0 || attempts[0].Get("kind").String() == "" || !attempts[0].Get("issues").Exists() {
		t.Errorf("the cut trace lost its structure: %.300s", tr.Raw)
	}
	content := attempts[0].Get("content").String()
	if content == "" || len(content) >= len(answer) || !strings.HasSuffix(content, "…") {
		t.Errorf("the draft's text is %d bytes (the answer %d): want it cut, not whole or dropped", len(content), len(answer))
	}
	if !strings.Contains(tr.Get("notes").Raw, "cut from") {
		t.Errorf("the trace does not say its texts were cut: %s", tr.Get("notes").Raw)
	}
	if b := factsGauge(t, h, "factgate_traces_memory_bytes"); b <= 0 || b > 256<<10 {
		t.Errorf("factgate_traces_memory_bytes = %v, want within traces.memory_bytes 256KiB", b)
	}
}

// factsGauge reads a gauge without labels from the server's registry.
func factsGauge(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	families, err := h.srv.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
			}
		}
	}
	return 0
}

// TestShrinkTrace covers the per-trace bound on its own: a trace within it is
// stored as it is; texts are cut proportionally to fit; a trace whose structure
// alone is too large keeps it and drops its texts.
func TestShrinkTrace(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("长文本 with \"quotes\" and <tags>. ", 400) // escapes grow it in JSON
	tests := []struct {
		name     string
		contents []string
		notes    int // extra notes of 100 bytes each (structure)
		max      int
		request  []string // the console's copy of the client's messages
		want     string   // "cut" or "dropped"
	}{
		{name: "one long text is cut", contents: []string{long}, max: 4096, want: "cut"},
		{name: "texts share the room", contents: []string{long, long[:len(long)/4], "short"}, max: 6000, want: "cut"},
		{name: "structure over the bound drops the texts", contents: []string{long}, notes: 80, max: 4096, want: "dropped"},
		{name: "the request's messages are cut too", contents: []string{"short"}, request: []string{long, long}, max: 6000, want: "cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := interceptors.NewTrace("r")
			for i, c := range tt.contents {
				tr.AddAttempt(interceptors.Attempt{Kind: "draft" + strconv.Itoa(i), Counts: "C1", Content: c,
					Issues: []interceptors.Issue{{Code: "evidence.not_in_replay", Path: "unitClaims[0]"}}})
			}
			for range tt.notes {
				tr.Note(strings.Repeat("n", 100))
			}
			if tt.request != nil {
				req := &interceptors.TraceRequest{Model: "m"}
				for _, c := range tt.request {
					req.Messages = append(req.Messages, interceptors.TraceMessage{Role: "user", Content: c, Bytes: len(c)})
				}
				tr.Do(func(tr *interceptors.Trace) { tr.Request = req })
			}
			b, _ := tr.MarshalJSON()
			out, err := shrinkTrace(tr, b, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			got := gjson.ParseBytes(out)
			if tt.want == "cut" && len(out) > tt.max {
				t.Errorf("%d bytes, over %d", len(out), tt.max)
			}
			if n := len(got.Get("attempts").Array()); n != len(tt.contents) {
				t.Fatalf("%d attempts kept, want %d", n, len(tt.contents))
			}
			for i, a := range got.Get("attempts").Array() {
				c := a.Get("content").String()
				if a.Get("issues.0.code").String() != "evidence.not_in_replay" {
					t.Errorf("attempt %d lost its issues", i)
				}
				switch {
				case tt.want == "dropped" && c != "":
					t.Errorf("attempt %d kept %d bytes of text", i, len(c))
				case tt.want == "cut" && len(tt.contents[i]) > 1000 && (c == "" || len(c) >= len(tt.contents[i])):
					t.Errorf("attempt %d: %d of %d bytes kept, want a cut", i, len(c), len(tt.contents[i]))
				case tt.want == "cut" && len(tt.contents[i]) < 100 && c != "" && c != tt.contents[i] && !strings.HasSuffix(c, "…"):
					t.Errorf("attempt %d: %q is not a clean cut of %q", i, c, tt.contents[i])
				}
			}
			for i, m := range got.Get("request.messages").Array() {
				if c := m.Get("content").String(); len(c) >= len(tt.request[i]) || !m.Get("truncated").Bool() || m.Get("bytes").Int() != int64(len(tt.request[i])) {
					t.Errorf("request message %d: %d of %d bytes kept, truncated %v: want a marked cut", i, len(c), len(tt.request[i]), m.Get("truncated").Bool())
				}
			}
			if notes := got.Get("notes").Raw; !strings.Contains(notes, tt.want) {
				t.Errorf("no note says the texts were %s: %.200s", tt.want, notes)
			}
		})
	}
}

// TestTraceSavedInTheRequestWithoutRedis: a trace store in memory alone says so,
// and the proxy saves a trace in the request's goroutine (no goroutine and timer
// per request); with Redis behind it, a save may wait on the network and runs
// apart, the answer waiting at most traceSaveWait for it.
func TestTraceSavedInTheRequestWithoutRedis(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte("upstreams: {u: {base_url: \"http://127.0.0.1:9/v1\"}}\nroutes: [{name: r, default: true, upstream: u}]\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := s.traces.(memoryTraceStore); !ok || !m.SavesInMemory() {
		t.Fatalf("the default trace store (%T) does not save in memory alone", s.traces)
	}
	url := factsRedisURL(t)
	cfg, err = ParseConfig([]byte("upstreams: {u: {base_url: \"http://127.0.0.1:9/v1\"}}\nroutes: [{name: r, default: true, upstream: u}]\n"+
		factsRedisCacheBlock(url, factsKeyPrefix(t, url))), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if m, ok := s.traces.(memoryTraceStore); !ok || m.SavesInMemory() {
		t.Fatalf("a trace store with Redis behind it (%T) claims to save in memory alone", s.traces)
	}
}

// TestTraceKey: a trace's key is the one every replica, of this version or
// another, reads and writes: "trace:" and the id as a Redis Cluster hash tag.
func TestTraceKey(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"", "e78292497e68e544fe0d3e9c78bb41ea", "{x}", "中"} {
		if got, want := traceKey(id), "trace:"+cache.HashTag(id); got != want {
			t.Errorf("traceKey(%q) = %q, want %q", id, got, want)
		}
	}
}
