package reqcontext

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/factgate/factgate/knowledge"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
)

// coronaLog is an operation log header that selects ra3-corona, 神州 and 盟军 in
// that player order, and a map.
const coronaLog = "Mod: corona\n地图: map_mp_2_feasel1\n玩家: 青龙 (神州); Blue (盟军)\n[操作记录]\n0:02.50 青龙 开始建造建筑 CelestialWarFactory [UnitId]260(建造者)\n"

// summary renders a context as item -> "values (source)", the way the tests state
// their expectations.
func summary(c *Context) map[string]string {
	out := map[string]string{"set": c.KnowledgeSet + " (" + string(c.SetSource) + ")"}
	for dim, values := range c.Scopes {
		out[dim] = strings.Join(values, ",") + " (" + string(c.ScopeSources[dim]) + ")"
	}
	if c.Session != "" {
		out["session"] = c.Session
	}
	return out
}

func TestResolutionPrecedence(t *testing.T) {
	t.Parallel()
	extracted := map[string]string{
		"set":      "ra3-corona (extracted)",
		"factions": "神州,盟军 (extracted)",
		"maps":     "map_mp_2_feasel1 (extracted)",
	}
	with := func(over map[string]string) map[string]string {
		m := maps.Clone(extracted)
		maps.Copy(m, over)
		return m
	}
	tests := []struct {
		name     string
		cfg      *Config
		variant  string
		header   []string
		metadata string
		user     string
		want     map[string]string
	}{
		{name: "no operation log: the default set, no scopes", user: "请分析这局对战。",
			want: map[string]string{"set": "ra3 (default)"}},
		{name: "extraction reads the header lines", user: coronaLog, want: extracted},
		{name: "the set rule's default for an unknown mod", user: "Mod: rise_of_the_reds\n玩家: A (苏联)\n",
			want: map[string]string{"set": "ra3 (extracted)", "factions": "苏联 (extracted)"}},

		// The knowledge set.
		{name: "route set over extraction", cfg: &Config{KnowledgeSet: "ra3"}, user: coronaLog,
			want: with(map[string]string{"set": "ra3 (route)"})},
		{name: "the variant's set replaces the route's", cfg: &Config{KnowledgeSet: "ra3"}, variant: "ra3-corona", user: "Mod: default\n",
			want: map[string]string{"set": "ra3-corona (route)"}},
		{name: "metadata set over route", cfg: &Config{KnowledgeSet: "ra3-corona"}, metadata: `{"factgate.knowledge_set":"ra3"}`, user: coronaLog,
			want: with(map[string]string{"set": "ra3 (metadata)"})},
		{name: "header set over metadata", header: []string{"X-Factgate-Knowledge-Set", "ra3"}, metadata: `{"factgate.knowledge_set":"ra3-corona"}`, user: "Mod: corona\n",
			want: map[string]string{"set": "ra3 (header)"}},

		// A scope dimension: factions.
		{name: "route factions over extraction", cfg: &Config{Scopes: map[string][]string{"factions": {"苏联"}}}, user: coronaLog,
			want: with(map[string]string{"factions": "苏联 (route)"})},
		{name: "metadata factions (array) over route", cfg: &Config{Scopes: map[string][]string{"factions": {"苏联"}}}, metadata: `{"factgate.factions":["帝国","盟军"]}`, user: coronaLog,
			want: with(map[string]string{"factions": "帝国,盟军 (metadata)"})},
		{name: "metadata factions (comma-separated, any case)", metadata: `{"factgate.Factions":"帝国, 盟军,帝国"}`, user: coronaLog,
			want: with(map[string]string{"factions": "帝国,盟军 (metadata)"})},
		{name: "header factions (percent-encoded) over metadata", header: []string{"X-Factgate-Scope-Factions", "%E7%9B%9F%E5%86%9B,%E8%8B%8F%E8%81%94"}, metadata: `{"factgate.factions":["帝国"]}`, user: coronaLog,
			want: with(map[string]string{"factions": "盟军,苏联 (header)"})},
		{name: "header dimension in any case", header: []string{"x-factgate-scope-FACTIONS", "%E5%B8%9D%E5%9B%BD"}, user: coronaLog,
			want: with(map[string]string{"factions": "帝国 (header)"})},

		// Another dimension: maps, each level on its own.
		{name: "route map", cfg: &Config{Scopes: map[string][]string{"Maps": {"map_mp_2_rao1"}}}, user: coronaLog,
			want: with(map[string]string{"maps": "map_mp_2_rao1 (route)"})},
		{name: "metadata map over route", cfg: &Config{Scopes: map[string][]string{"maps": {"map_mp_2_rao1"}}}, metadata: `{"factgate.maps":"map_mp_2_feasel8"}`, user: coronaLog,
			want: with(map[string]string{"maps": "map_mp_2_feasel8 (metadata)"})},
		{name: "header map over metadata", header: []string{"X-Factgate-Scope-Maps", "map_mp_2_feasel2"}, metadata: `{"factgate.maps":"map_mp_2_feasel8"}`, user: coronaLog,
			want: with(map[string]string{"maps": "map_mp_2_feasel2 (header)"})},
		{name: "items resolve independently", header: []string{"X-Factgate-Knowledge-Set", "ra3"}, metadata: `{"factgate.maps":"map_mp_2_feasel8"}`, user: coronaLog,
			want: with(map[string]string{"set": "ra3 (header)", "maps": "map_mp_2_feasel8 (metadata)"})},

		// The session.
		{name: "metadata session", metadata: `{"factgate.session":"analysis-7"}`, user: "x",
			want: map[string]string{"set": "ra3 (default)", "session": "analysis-7"}},
		{name: "header session over metadata", header: []string{"X-Factgate-Session", "run%201"}, metadata: `{"factgate.session":"analysis-7"}`, user: "x",
			want: map[string]string{"set": "ra3 (default)", "session": "run 1"}},
		{name: "blank header and metadata values count as absent", header: []string{"X-Factgate-Knowledge-Set", "%20"}, metadata: `{"factgate.knowledge_set":" ","factgate.factions":[]}`, user: coronaLog,
			want: extracted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newResolver(t, tc.cfg)
			extra := ""
			if tc.metadata != "" {
				extra = `"metadata":` + tc.metadata
			}
			ex := exchange(chatBody(t, tc.user, extra), headers(tc.header...))
			ex.Overrides.KnowledgeSet = tc.variant
			if err := r.OnRequest(context.Background(), ex); err != nil {
				t.Fatalf("OnRequest: %v", err)
			}
			c, ok := FromExchange(ex)
			if !ok {
				t.Fatal("no context stored in the exchange")
			}
			if got := summary(c); !maps.Equal(got, tc.want) {
				t.Fatalf("context\n got %v\nwant %v", got, tc.want)
			}
			if c.Set == nil || c.Set.Name != c.KnowledgeSet {
				t.Fatalf("Set %v does not match KnowledgeSet %q", c.Set, c.KnowledgeSet)
			}
		})
	}
}

func TestExtractionFromEveryReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file     string
		set      string
		factions string
		players  string
		mapID    string
	}{
		{"allied_vs_soviet.txt", "ra3", "盟军,苏联", "PlayerA,PlayerB", "map_mp_2_rao1"},
		{"allied_vs_soviet.large.txt", "ra3", "盟军,苏联", "PlayerA,PlayerB", "map_mp_2_rao1"},
		{"allied_vs_soviet.part1.txt", "ra3", "盟军,苏联", "PlayerA,PlayerB", "map_mp_2_rao1"},
		{"allied_vs_soviet.part2.txt", "ra3", "盟军,苏联", "PlayerA,PlayerB", "map_mp_2_rao1"},
		{"allied_vs_soviet.part3.txt", "ra3", "盟军,苏联", "PlayerA,PlayerB", "map_mp_2_rao1"},
		{"corona_celestial_vs_allied.txt", "ra3-corona", "神州,盟军", "青龙,Blue", "map_mp_2_feasel1"},
		{"mcv_vs_miner.txt", "ra3", "盟军,苏联", "Alice,Boris", "map_mp_2_rao1"},
	}
	// The app sends the log after a line of prose, as a string content or as a
	// text part; both must be read the same.
	shapes := map[string]func(string) []byte{
		"string content": func(log string) []byte { return chatBody(t, "请分析下面这局录像。\n"+log, "") },
		"text parts": func(log string) []byte {
			return []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"请分析下面这局录像。"},{"type":"image_url","image_url":{"url":"data:,"}},{"type":"text","text":` + jsonString(log) + `}]}]}`)
		},
	}
	r := newResolver(t, nil)
	for _, tc := range tests {
		for shape, build := range shapes {
			t.Run(tc.file+"/"+shape, func(t *testing.T) {
				t.Parallel()
				ex := exchange(build(replay(t, tc.file)), nil)
				if err := r.OnRequest(context.Background(), ex); err != nil {
					t.Fatal(err)
				}
				c, _ := FromExchange(ex)
				var players, factions []string
				for _, p := range c.Players {
					players = append(players, p.Name)
					factions = append(factions, p.Scope)
				}
				got := []string{c.KnowledgeSet, string(c.SetSource), strings.Join(c.Scopes["factions"], ","), strings.Join(players, ","), strings.Join(factions, ","), strings.Join(c.Scopes["maps"], ",")}
				want := []string{tc.set, "extracted", tc.factions, tc.players, tc.factions, tc.mapID}
				if strings.Join(got, " | ") != strings.Join(want, " | ") {
					t.Fatalf("got  %q\nwant %q", got, want)
				}
			})
		}
	}
}

func TestTraceRecordsTheContext(t *testing.T) {
	t.Parallel()
	r := newResolver(t, nil)
	ex := exchange(chatBody(t, coronaLog, `"metadata":{"factgate.session":"s-42"}`), nil)
	if err := r.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	tr := ex.Trace
	if tr.KnowledgeSet != "ra3-corona" || tr.Session != "s-42" || strings.Join(tr.Scopes["factions"], ",") != "神州,盟军" || strings.Join(tr.Scopes["maps"], ",") != "map_mp_2_feasel1" {
		t.Fatalf("trace: set %q session %q scopes %v", tr.KnowledgeSet, tr.Session, tr.Scopes)
	}
	if len(tr.Notes) == 0 || !strings.Contains(tr.Notes[0], "knowledge set ra3-corona (extracted)") || !strings.Contains(tr.Notes[0], "青龙 (神州)") {
		t.Fatalf("trace notes %q do not say where the context came from", tr.Notes)
	}
}

func TestMetadataIsStripped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string
	}{
		{"factgate keys go, others stay byte for byte",
			`{"model":"m", "metadata": {"user_id": "u-1", "factgate.session": "s", "factgate.factions": ["盟军"], "trace": {"a": [1, 2]}}, "zz": 1.50}`,
			`{"model":"m", "metadata": {"user_id": "u-1", "trace": {"a": [1, 2]}}, "zz": 1.50}`},
		{"metadata with only factgate keys is removed",
			`{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{"factgate.knowledge_set":"ra3","Factgate.Maps":"map_mp_2_rao1"},"top_p":0.9}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"top_p":0.9}`},
		{"an escaped key is still factgate's",
			`{"metadata":{"factgate\u002esession":"s","keep.me":"1"},"model":"m"}`,
			`{"metadata":{"keep.me":"1"},"model":"m"}`},
		{"no factgate keys: the body is untouched",
			`{"model":"m","metadata":{},"x":null}`,
			`{"model":"m","metadata":{},"x":null}`},
		{"metadata that is not an object is left alone",
			`{"model":"m","metadata":null}`,
			`{"model":"m","metadata":null}`},
	}
	r := newResolver(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ex := exchange([]byte(tc.body), nil)
			if err := r.OnRequest(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			if string(ex.Body) != tc.want {
				t.Fatalf("body\n got %s\nwant %s", ex.Body, tc.want)
			}
			if string(ex.Original) != tc.body {
				t.Fatal("the original body was edited")
			}
		})
	}
	// The values were read before they were stripped.
	ex := exchange([]byte(tests[1].body), nil)
	if err := r.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	if c, _ := FromExchange(ex); c.SetSource != SourceMetadata || c.ScopeSources["maps"] != SourceMetadata {
		t.Fatalf("stripped metadata was not used: %v", summary(c))
	}
}

func TestClientErrorsAre400(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header []string
		meta   string
		param  string
		code   string
		msg    []string
	}{
		{"unknown set in the header", []string{"X-Factgate-Knowledge-Set", "ra4"}, "", "X-Factgate-Knowledge-Set", "unknown_knowledge_set",
			[]string{`"ra4"`, "ra3, ra3-corona"}},
		{"a set of another pack", []string{"X-Factgate-Knowledge-Set", "dnd"}, "", "X-Factgate-Knowledge-Set", "unknown_knowledge_set",
			[]string{`"dnd"`, "pack ra3", "ra3, ra3-corona"}},
		{"unknown set in metadata", nil, `{"factgate.knowledge_set":"corona"}`, "metadata.factgate.knowledge_set", "unknown_knowledge_set",
			[]string{`"corona"`, "ra3, ra3-corona"}},
		{"set in metadata is not a string", nil, `{"factgate.knowledge_set":3}`, "metadata.factgate.knowledge_set", "invalid_factgate_metadata",
			[]string{"must be a string"}},
		{"scope in metadata is not a list", nil, `{"factgate.factions":{"a":1}}`, "metadata.factgate.factions", "invalid_factgate_metadata",
			[]string{"comma-separated string or an array of strings"}},
		{"scope array with a number", nil, `{"factgate.maps":["map_mp_2_rao1",2]}`, "metadata.factgate.maps", "invalid_factgate_metadata", nil},
		{"broken percent-encoding", []string{"X-Factgate-Scope-Factions", "%E7%9B%9F,%G1"}, "", "X-Factgate-Scope-Factions", "invalid_factgate_header",
			[]string{"percent-encoding", "盟军"}},
		{"percent-encoding of a cut character", []string{"X-Factgate-Scope-Factions", "%E7%9B"}, "", "X-Factgate-Scope-Factions", "invalid_factgate_header",
			[]string{"does not decode to UTF-8"}},
		{"an undecodable session", []string{"X-Factgate-Session", "%zz"}, "", "X-Factgate-Session", "invalid_factgate_header", nil},
	}
	r := newResolver(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			extra := ""
			if tc.meta != "" {
				extra = `"metadata":` + tc.meta
			}
			ex := exchange(chatBody(t, coronaLog, extra), headers(tc.header...))
			err := r.OnRequest(context.Background(), ex)
			e := interceptors.AsError(err)
			if e == nil || e.Status != 400 || e.Code != tc.code || e.Param != tc.param {
				t.Fatalf("want a 400 %s on %s, got %#v", tc.code, tc.param, err)
			}
			env := e.Envelope()
			if gjson.GetBytes(env, "error.type").Str != "invalid_request_error" || gjson.GetBytes(env, "error.param").Str != tc.param {
				t.Fatalf("envelope %s", env)
			}
			for _, m := range tc.msg {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q lacks %q", e.Message, m)
				}
			}
			if _, ok := FromExchange(ex); ok {
				t.Fatal("a failed request stored a context")
			}
		})
	}
}

func TestNotesForValuesThatSelectNothing(t *testing.T) {
	t.Parallel()
	r := newResolver(t, nil)
	ex := exchange(chatBody(t, "Mod: default\n", `"metadata":{"factgate.factions":"神州","factgate.flavour":"x"}`), nil)
	if err := r.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(ex.Trace.Notes, "\n")
	for _, want := range []string{`factions value "神州" (from the metadata) is not in knowledge set ra3`, "metadata key factgate.flavour names no scope dimension"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if gjson.GetBytes(ex.Body, "metadata").Exists() {
		t.Fatalf("unknown factgate keys were forwarded: %s", ex.Body)
	}
}

func TestNewValidatesTheRouteConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		pack string
		cfg  *Config
		want string
	}{
		{"unknown set", "ra3", &Config{KnowledgeSet: "ra3-coronna"}, `knowledge_set: "ra3-coronna" is not a knowledge set of pack ra3 (have: ra3, ra3-corona)`},
		{"set of another pack", "ra3", &Config{KnowledgeSet: "dnd"}, `knowledge_set: "dnd" is not a knowledge set of pack ra3`},
		{"unknown dimension", "ra3", &Config{Scopes: map[string][]string{"map": {"map_mp_2_rao1"}}}, `scopes.map: pack ra3 has no scope dimension "map" (have: factions, maps)`},
		{"unknown value", "ra3", &Config{Scopes: map[string][]string{"factions": {"盟军", "Allies"}}}, `scopes.factions[1]: "Allies" is not a factions value of any knowledge set of pack ra3`},
		{"no values", "ra3", &Config{Scopes: map[string][]string{"maps": {}}}, `scopes.maps: no values`},
		{"a pack without dimensions", "dnd", &Config{Scopes: map[string][]string{"factions": {"盟军"}}}, `scopes.factions: pack dnd has no scope dimension`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.cfg, testDeps(t, tc.pack))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(nil, interceptors.Deps{}); err == nil || !strings.Contains(err.Error(), "needs the route's pack") {
		t.Fatalf("New without a pack: %v", err)
	}
	if _, err := New(&Config{KnowledgeSet: "ra3-corona", Scopes: map[string][]string{"factions": {"神州"}}}, testDeps(t, "ra3")); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
}

func TestDnDPackGetsItsDefaultSet(t *testing.T) {
	t.Parallel()
	r, err := New(nil, testDeps(t, "dnd"))
	if err != nil {
		t.Fatal(err)
	}
	ex := exchange([]byte(`{"model":"m","messages":[{"role":"user","content":"The goblins attack!"}]}`), nil)
	if err := r.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	if c, _ := FromExchange(ex); c.KnowledgeSet != "dnd" || c.SetSource != SourceDefault || len(c.Scopes) != 0 {
		t.Fatalf("%v", summary(c))
	}
}

// The context's trace note names the set, every scope with its source, the
// players and the session, in this form.
func TestContextDescription(t *testing.T) {
	t.Parallel()
	c := &Context{
		KnowledgeSet: "ra3", SetSource: SourceExtracted, Set: &knowledge.Set{Version: 3},
		Scopes:       knowledge.Scopes{"maps": {"map_mp_2_rao1"}, "factions": {"盟军", "苏联"}},
		ScopeSources: map[string]Source{"maps": SourceExtracted, "factions": SourceHeader},
		Players:      []knowledge.Player{{Name: "PlayerA", Scope: "盟军"}, {Name: "PlayerB", Scope: "苏联"}},
		Session:      "s1",
	}
	want := "context: knowledge set ra3 (extracted) overlay v3; factions 盟军,苏联 (header); maps map_mp_2_rao1 (extracted); players PlayerA (盟军), PlayerB (苏联); session s1"
	if got := c.describe(); got != want {
		t.Fatalf("describe() =\n%s\nwant\n%s", got, want)
	}
}
