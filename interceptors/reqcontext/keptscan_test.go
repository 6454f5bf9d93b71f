package reqcontext

import (
	"bufio"
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// TestScanRequestReadsWhatTheStageReads: the proxy's walk (ScanRequest) finds
// the members the stage's own walk finds, and hands every other member to its
// caller, in order, at its offset.
func TestScanRequestReadsWhatTheStageReads(t *testing.T) {
	t.Parallel()
	bodies := append(slices.Clone(messageBodies),
		// More messages than the scan's room.
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"},{"role":"user","content":"e"}]}`)
	for _, body := range bodies {
		var others []string
		sc := ScanRequest([]byte(body), func(key string, v int) int {
			end := rawjson.ValueEnd(body, v)
			others = append(others, rawjson.Key(key)+"="+body[v:end])
			return end
		})
		if want := scanRequest(body, nil, nil); !reflect.DeepEqual(sc.members, want) {
			t.Errorf("%.80s: ScanRequest\n got %+v\nwant %+v", body, sc.members, want)
		}
		var want []string
		rawjson.EachMember(body, func(m rawjson.Member) bool {
			if k := rawjson.Key(m.Key); k != "messages" && k != "metadata" && k != "response_format" {
				want = append(want, k+"="+m.Raw)
			}
			return true
		})
		if !slices.Equal(others, want) {
			t.Errorf("%.80s: other members %q, want %q", body, others, want)
		}
	}
}

// TestKeptScan: the stage resolves a body the same with the proxy's scan as
// with its own, and uses a kept scan only for the slice it was kept for.
func TestKeptScan(t *testing.T) {
	t.Parallel()
	r := newResolver(t, nil)
	resolveWith := func(body []byte, keep func(ex *interceptors.Exchange)) (*Context, []string, string) {
		t.Helper()
		ex := exchange(body, nil)
		ex.Body = ex.Original
		if keep != nil {
			keep(ex)
		}
		if _, ok := FromExchange(ex); ok {
			t.Fatal("a kept scan reads as the request context")
		}
		if err := r.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		c, ok := FromExchange(ex)
		if !ok {
			t.Fatal("no context")
		}
		return c, ex.Trace.Notes, string(ex.Body)
	}
	same := func(what string, a, b *Context) {
		t.Helper()
		if !reflect.DeepEqual(summary(a), summary(b)) || !reflect.DeepEqual(a.Players, b.Players) || a.Applies != b.Applies ||
			!reflect.DeepEqual(a.scan.list, b.scan.list) || a.scan.found != b.scan.found {
			t.Errorf("%s: context\n got %+v\nwant %+v", what, a, b)
		}
	}
	for _, extra := range []string{"", `"metadata":{"factgate.session":"s1","factgate.maps":"m2","other":1},"response_format":{"type":"json_object"}`} {
		body := chatBody(t, coronaLog, extra)
		want, wantNotes, wantBody := resolveWith(body, nil)
		got, notes, out := resolveWith(body, func(ex *interceptors.Exchange) {
			// The proxy scans its own buffer and keeps the scan for the copy;
			// fasthttp may reuse its buffer: the stage reads only the copy.
			scanned := slices.Clone(body)
			KeepScan(ex, ex.Original, ScanRequest(scanned, nil))
			for i := range scanned {
				scanned[i] = ' '
			}
		})
		same(extra, got, want)
		if !slices.Equal(notes, wantNotes) || out != wantBody {
			t.Errorf("%s: notes %q body %s, want %q %s", extra, notes, out, wantNotes, wantBody)
		}

		// A scan of another body of the same length, kept for the original,
		// serves only the original: a stage before this one replaced the body.
		// Another log, padded with spaces to the length of the first: its
		// messages are elsewhere.
		other := string(chatBody(t, "Mod: x\n玩家: A (苏联)\n", extra))
		if len(other) >= len(body) {
			t.Fatalf("test bodies of lengths %d, %d", len(other), len(body))
		}
		other = other[:len(other)-1] + strings.Repeat(" ", len(body)-len(other)) + "}"
		wantOther, _, _ := resolveWith([]byte(other), nil)
		gotOther, _, _ := resolveWith([]byte(other), func(ex *interceptors.Exchange) {
			KeepScan(ex, []byte(other), ScanRequest(body, nil))
		})
		if summary(gotOther)["factions"] != "苏联 (extracted)" {
			t.Fatalf("%s: the replaced body resolves to %v", extra, summary(gotOther))
		}
		same(extra+" (replaced)", gotOther, wantOther)

		// A scan is not kept for a body of another length.
		ex := exchange(body, nil)
		KeepScan(ex, ex.Original[:len(body)-1], ScanRequest(body, nil))
		if ex.Value(contextKey{}) != nil {
			t.Errorf("%s: a scan kept for a body of another length", extra)
		}
	}
}

// TestSharedScopeSources: a context whose scopes are all extracted gets the
// sources New made for its dimensions, equal to what a map of its own would
// hold; any other context gets a map of its own, and the shared ones do not
// change.
func TestSharedScopeSources(t *testing.T) {
	t.Parallel()
	r := newResolver(t, nil)
	if len(r.extracted) != 1<<len(r.dims) {
		t.Fatalf("%d shared sources for dimensions %v", len(r.extracted), r.dims)
	}
	before := make([]map[string]Source, len(r.extracted))
	for i, m := range r.extracted {
		before[i] = maps.Clone(m)
	}
	resolve := func(user string, h interceptors.HeaderReader) *Context {
		t.Helper()
		ex := exchange(chatBody(t, user, ""), h)
		if err := r.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		c, _ := FromExchange(ex)
		return c
	}
	for _, tc := range []struct {
		user string
		want map[string]Source
	}{
		{coronaLog, map[string]Source{"factions": SourceExtracted, "maps": SourceExtracted}},
		{"玩家: A (苏联)\n", map[string]Source{"factions": SourceExtracted}},
		{"地图: map_mp_2_feasel1\n", map[string]Source{"maps": SourceExtracted}},
		{"请分析这局对战。", nil},
	} {
		a, b := resolve(tc.user, nil), resolve(tc.user, nil)
		if !maps.Equal(a.ScopeSources, tc.want) || (tc.want == nil) != (a.ScopeSources == nil) {
			t.Errorf("%q: sources %v, want %v", tc.user, a.ScopeSources, tc.want)
		}
		if tc.want != nil && reflect.ValueOf(a.ScopeSources).Pointer() != reflect.ValueOf(b.ScopeSources).Pointer() {
			t.Errorf("%q: two requests got sources of their own", tc.user)
		}
	}
	c := resolve(coronaLog, headers(HeaderScopePrefix+"Maps", "map_mp_4_xyzw1"))
	if want := map[string]Source{"factions": SourceExtracted, "maps": SourceHeader}; !maps.Equal(c.ScopeSources, want) {
		t.Errorf("with a header: sources %v, want %v", c.ScopeSources, want)
	}
	for i, m := range r.extracted {
		if !maps.Equal(m, before[i]) {
			t.Errorf("shared sources %d changed: %v, was %v", i, m, before[i])
		}
	}
}

// TestTraceNotes: the two notes built in one buffer are the description and
// the verdict as built apart.
func TestTraceNotes(t *testing.T) {
	t.Parallel()
	r := newResolver(t, nil)
	for _, user := range []string{coronaLog, "请分析这局对战。"} {
		ex := exchange(chatBody(t, user, `"metadata":{"factgate.session":"s1"}`), nil)
		if err := r.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		c, _ := FromExchange(ex)
		described, verdict := c.traceNotes()
		if described != c.describe() || verdict != "context: "+c.Applies.Reason {
			t.Errorf("%q: notes %q, %q; want %q, %q", user, described, verdict, c.describe(), "context: "+c.Applies.Reason)
		}
		if got := ex.Trace.Notes; len(got) < 2 || got[0] != described || got[1] != verdict {
			t.Errorf("%q: trace notes %q", user, got)
		}
	}
}

// TestScopeDims: the stage's sorted dimensions of a context are the keys of its
// Scopes, whichever step chose them, and describe reads the same with them as
// when it sorts the keys itself.
func TestScopeDims(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cfg      *Config
		header   []string
		user     string
		metadata string
	}{
		{name: "extracted", user: coronaLog},
		{name: "players only", user: "玩家: A (苏联)\n"},
		{name: "nothing", user: "请分析这局对战。"},
		{name: "a header", user: coronaLog, header: []string{HeaderScopePrefix + "Maps", "map_mp_4_xyzw1"}},
		{name: "a header, no extraction", user: "hi", header: []string{HeaderScopePrefix + "factions", "%E7%9B%9F%E5%86%9B"}},
		{name: "metadata", user: coronaLog, metadata: `"metadata":{"factgate.factions":["苏联"],"factgate.nodim":"x"}`},
		{name: "the route", user: coronaLog, cfg: &Config{Scopes: map[string][]string{"maps": {"map_mp_2_rao1"}}}},
	} {
		r := newResolver(t, tc.cfg)
		ex := exchange(chatBody(t, tc.user, tc.metadata), headers(tc.header...))
		if err := r.OnRequest(context.Background(), ex); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c, _ := FromExchange(ex)
		keys := slices.Sorted(maps.Keys(c.Scopes))
		if !slices.Equal(c.scopeDims, keys) {
			t.Errorf("%s: scope dims %v, want %v", tc.name, c.scopeDims, keys)
		}
		alone := *c
		alone.scopeDims = nil
		if got, want := c.describe(), alone.describe(); got != want {
			t.Errorf("%s: describe %q, want %q", tc.name, got, want)
		}
	}
}

// TestHeaderNamesReadAsPeekReads: a header name read without normalizing
// (canonical) finds what Peek finds, in a header that normalizes its keys and
// in one that does not, whatever the case the client sent.
func TestHeaderNamesReadAsPeekReads(t *testing.T) {
	t.Parallel()
	names := []string{HeaderKnowledgeSet, HeaderSession, HeaderScopePrefix + "Factions", HeaderScopePrefix + "Maps",
		HeaderScopePrefix + "FactionGroups", HeaderScopePrefix + "Map_pool", HeaderScopePrefix + "Tier2", "x-factgate-session", "X--Double"}
	canonical := map[string]bool{HeaderKnowledgeSet: true, HeaderSession: true, HeaderScopePrefix + "Factions": true,
		HeaderScopePrefix + "Maps": true, HeaderScopePrefix + "Tier2": true, "X--Double": true}
	for _, name := range names {
		n := newHeaderName(name)
		if (n.key != nil) != canonical[name] {
			t.Errorf("%s: canonical %v, want %v", name, n.key != nil, canonical[name])
		}
		for _, sent := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			for _, raw := range []bool{false, true} {
				var req fasthttp.Request
				req.Header.DisableNormalizing()
				if !raw {
					req.Header.EnableNormalizing()
				}
				if err := req.Header.Read(bufio.NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: h\r\n" + sent + ": v1\r\n\r\n"))); err != nil {
					t.Fatal(err)
				}
				h := &req.Header
				if !raw && string(h.Peek(name)) != "v1" {
					t.Fatalf("%s sent as %s: Peek reads %q", name, sent, h.Peek(name))
				}
				if got, want := string(n.peek(h)), string(h.Peek(name)); got != want {
					t.Errorf("%s sent as %s (normalizing %v): %q, Peek reads %q", name, sent, !raw, got, want)
				}
			}
		}
	}
}
