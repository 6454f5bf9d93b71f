package inject

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
)

var coronaScopes = knowledge.Scopes{"factions": {"神州", "盟军"}, "maps": {"map_mp_2_feasel1"}}

// unknownFieldsBody has fields factgate does not know, odd number formats, escapes
// and spacing, and messages of every role; only the system message may change.
func unknownFieldsBody(t *testing.T) []byte {
	return []byte(`{"zz_provider_ext": {"a": [1, 2.50, "\u00e9\/"], "b": null},` +
		` "model":"ra3-analyst",` +
		` "messages" : [` +
		`{"role":"system","content":"你是录像分析助手。"}, ` +
		`{"role":"user","name":"app","content":` + jsonString("请分析。\n"+replay(t, "corona_celestial_vs_allied.txt")) + `,"x_custom":{"k":1e3}},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"ok"} ],` +
		` "temperature":0.20, "response_format":{"type":"json_object"}, "logit_bias":{"50256":-100}, "stream":false}`)
}

func TestInjectionKeepsEverythingElseByteIdentical(t *testing.T) {
	t.Parallel()
	body := unknownFieldsBody(t)
	ex := resolved(t, "ra3", append([]byte(nil), body...))
	run(t, newInjector(t, &Config{RouteValidates: true}, "ra3"), ex)

	before, _ := reqcontext.FindMessages(body)
	after, _ := reqcontext.FindMessages(ex.Body)
	if !bytes.Equal(ex.Body[:after.Start], body[:before.Start]) || !bytes.Equal(ex.Body[after.End:], body[before.End:]) {
		t.Fatalf("bytes outside messages changed:\n got %s\nwant %s", ex.Body, body)
	}
	var kept, got [][]byte
	for _, m := range before.Items[1:] {
		kept = append(kept, body[m.Start:m.End])
	}
	for _, m := range after.Items[1:] {
		got = append(got, ex.Body[m.Start:m.End])
	}
	if len(got) != len(kept) {
		t.Fatalf("%d messages after the system message, want %d", len(got), len(kept))
	}
	for i := range kept {
		if !bytes.Equal(got[i], kept[i]) {
			t.Errorf("message %d changed:\n got %s\nwant %s", i+1, got[i], kept[i])
		}
	}
	sys, first := systemMessages(ex.Body)
	if len(sys) != 1 || first != 0 {
		t.Fatalf("want one system message at the front, got %d at %d", len(sys), first)
	}
	// The request is in JSON mode: the knowledge, no claims contract.
	want := Compose(Parts{
		Knowledge:     rendered(t, "ra3-corona", coronaScopes),
		ClientHeading: "## 应用的补充要求",
		ClientSystem:  []string{"你是录像分析助手。"},
	})
	if sys[0] != want {
		t.Fatalf("injected prompt differs from Compose (%d vs %d bytes)", len(sys[0]), len(want))
	}
}

func TestClientSystemMessagePolicies(t *testing.T) {
	t.Parallel()
	user := `{"role":"user","content":` + jsonString("Mod: corona\n地图: map_mp_2_feasel1\n玩家: 青龙 (神州); Blue (盟军)\n") + `}`
	ours := Compose(Parts{Knowledge: rendered(t, "ra3-corona", coronaScopes), AdditionalRules: "## 额外规则\n- 只用中文回答。"})
	merged := func(client ...string) string {
		return Compose(Parts{Knowledge: rendered(t, "ra3-corona", coronaScopes), AdditionalRules: "## 额外规则\n- 只用中文回答。", ClientHeading: "## 应用的补充要求", ClientSystem: client})
	}
	tests := []struct {
		name     string
		policy   Policy
		messages string
		want     string // the one system message; "" = the body must be unchanged
		others   int    // messages after it
	}{
		{"merge: a string system message", Merge, `{"role":"system","content":"回答要简短。"},` + user, merged("回答要简短。"), 1},
		{"merge: text parts, two system messages and a developer message, anywhere", Merge,
			`{"role":"system","content":[{"type":"text","text":"第一条。"},{"type":"text","text":"第二条：\"引号\""}]},` + user +
				`,{"role":"developer","content":"开发者说明。"},{"role":"system","content":""}`,
			merged("第一条。\n第二条：\"引号\"", "开发者说明。"), 1},
		{"merge: no client system message", Merge, user, ours, 1},
		{"replace: the client's are dropped", Replace, `{"role":"system","content":"回答要简短。"},` + user + `,{"role":"system","content":"x"}`, ours, 1},
		{"keep: the client's system message wins, nothing injected", Keep, `{"role":"system","content":"回答要简短。"},` + user, "", 0},
		{"keep: a request without one gets ours", Keep, user, ours, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"model":"m","messages":[` + tc.messages + `],"top_p":1}`)
			ex := resolved(t, "ra3", append([]byte(nil), body...))
			in := newInjector(t, &Config{SystemMessage: tc.policy, AdditionalRules: "## 额外规则\n- 只用中文回答。\n"}, "ra3")
			run(t, in, ex)
			if tc.want == "" {
				if !bytes.Equal(ex.Body, body) {
					t.Fatalf("body changed:\n%s", ex.Body)
				}
				if !strings.Contains(strings.Join(ex.Trace.Notes, "\n"), "keep") {
					t.Fatalf("the trace does not say why nothing was injected: %q", ex.Trace.Notes)
				}
				return
			}
			sys, first := systemMessages(ex.Body)
			if len(sys) != 1 || first != 0 {
				t.Fatalf("want one system message at the front, got %d at %d: %s", len(sys), first, ex.Body)
			}
			if sys[0] != tc.want {
				t.Fatalf("system message\n got %q\nwant %q", tail(sys[0]), tail(tc.want))
			}
			if n := len(gjson.GetBytes(ex.Body, "messages").Array()) - 1; n != tc.others {
				t.Fatalf("%d other messages, want %d", n, tc.others)
			}
		})
	}
}

// tail shortens a prompt to its end for messages.
func tail(s string) string {
	if len(s) > 200 {
		return "..." + s[len(s)-200:]
	}
	return s
}

func TestContractAppearsIffTheRouteValidates(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	tests := []struct {
		name      string
		pack      string
		mode      ContractMode
		validates bool
		hasBlock  bool  // the route has a validate block, maybe switched off
		variant   *bool // Overrides.Validate
		system    string
		want      bool // the contract is in the prompt
		injected  bool // Exchange.ContractInjected
	}{
		{"auto on a validating route", "ra3", "", true, true, nil, "", true, true},
		{"auto on a route without validation", "ra3", ContractAuto, false, false, nil, "", false, false},
		{"auto, the variant turns validation off", "ra3", ContractAuto, true, true, &no, "", false, false},
		{"auto, the variant turns it on where the route has no validator", "ra3", ContractAuto, false, false, &yes, "", false, false},
		{"auto, the variant turns on a validator the route switched off", "ra3", ContractAuto, false, true, &yes, "", true, true},
		{"always", "ra3", ContractAlways, false, false, &no, "", true, true},
		{"never", "ra3", ContractNever, true, true, nil, "", false, false},
		{"the client's own prompt asks for claims", "ra3", ContractAuto, true, true, nil, "最后输出 [机器可读声明] 和 JSON。", true, false},
		{"an answer-shape pack gets its answer contract", "dnd", ContractAuto, true, true, nil, "", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msgs := `{"role":"user","content":"地图: map_mp_2_rao1"}`
			if tc.pack == "dnd" {
				msgs = `{"role":"user","content":"DM: Roll initiative."}`
			}
			if tc.system != "" {
				msgs = `{"role":"system","content":` + jsonString(tc.system) + `},` + msgs
			}
			ex := resolved(t, tc.pack, []byte(`{"model":"m","messages":[`+msgs+`]}`))
			ex.Overrides.Validate = tc.variant
			run(t, newInjector(t, &Config{Contract: tc.mode, RouteValidates: tc.validates, RouteHasValidator: tc.hasBlock}, tc.pack), ex)
			sys, _ := systemMessages(ex.Body)
			contract := contractOf(t, tc.pack)
			if contract == "" {
				t.Fatalf("pack %s has no contract", tc.pack)
			}
			if got := strings.Contains(sys[0], strings.TrimSpace(contract)); got != tc.want {
				t.Fatalf("contract in prompt: %v, want %v", got, tc.want)
			}
			if got := ex.ContractInjected; got != tc.injected {
				t.Fatalf("Exchange.ContractInjected = %v, want %v", got, tc.injected)
			}
		})
	}
}

func TestCustomPromptAndOverrides(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "custom.md"), []byte("你是一名红警 3 解说。\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.md"), []byte("- 不要猜测。\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deps := testDeps(t, "ra3")
	deps.Resolve = func(p string) string { return filepath.Join(dir, p) }
	variantPrompt, variantRules := "变体 B 的提示。", "- 变体 B 的规则。"
	tests := []struct {
		name      string
		cfg       Config
		overrides interceptors.Overrides
		want      string
	}{
		{"custom prompt file replaces the knowledge; rules file follows",
			Config{UseCustomSystemPrompt: true, CustomSystemPromptFile: "custom.md", AdditionalRulesFile: "rules.md"}, interceptors.Overrides{},
			"你是一名红警 3 解说。\n\n- 不要猜测。"},
		{"the variant's custom prompt replaces the rendered knowledge",
			Config{AdditionalRules: "- 路由规则。"}, interceptors.Overrides{CustomPrompt: &variantPrompt},
			"变体 B 的提示。\n\n- 路由规则。"},
		{"the variant's rules replace the route's",
			Config{UseCustomSystemPrompt: true, CustomSystemPrompt: "路由提示。", AdditionalRules: "- 路由规则。"}, interceptors.Overrides{AdditionalRules: &variantRules},
			"路由提示。\n\n- 变体 B 的规则。"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, err := New(&tc.cfg, deps)
			if err != nil {
				t.Fatal(err)
			}
			ex := resolved(t, "ra3", []byte(`{"model":"m","messages":[{"role":"user","content":"Mod: corona\n地图: map_mp_2_feasel1"}]}`))
			ex.Overrides = tc.overrides
			run(t, in, ex)
			if sys, _ := systemMessages(ex.Body); len(sys) != 1 || sys[0] != tc.want {
				t.Fatalf("system messages %q, want [%q]", sys, tc.want)
			}
		})
	}
}

func TestFailOpenLeavesTheRequestAsSent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, note string
		context          bool
	}{
		{"no context stage ran", `{"model":"m","messages":[{"role":"user","content":"地图: map_mp_2_rao1"}]}`, "no knowledge set was resolved", false},
		{"not an analysis", `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`, "not a request pack ra3 is about", true},
		{"no messages", `{"model":"m","prompt":"x"}`, "no messages array", true},
		{"messages is not an array", `{"model":"m","messages":"x"}`, "no messages array", true},
	}
	in := newInjector(t, nil, "ra3")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(tc.body)
			ex := &interceptors.Exchange{Body: append([]byte(nil), body...), Trace: interceptors.NewTrace("t")}
			if tc.context {
				ex = resolved(t, "ra3", append([]byte(nil), body...))
			}
			run(t, in, ex)
			if !bytes.Equal(ex.Body, body) {
				t.Fatalf("body changed: %s", ex.Body)
			}
			if !strings.Contains(strings.Join(ex.Trace.Notes, "\n"), tc.note) {
				t.Fatalf("notes %q lack %q", ex.Trace.Notes, tc.note)
			}
			if ex.ContractInjected {
				t.Fatal("Exchange.ContractInjected on a request that was not injected")
			}
		})
	}
}

func TestTraceSaysWhatWasInjected(t *testing.T) {
	t.Parallel()
	ex := resolved(t, "ra3", []byte(`{"model":"m","messages":[{"role":"system","content":"a"},{"role":"user","content":"Mod: corona\n玩家: 青龙 (神州)"}]}`))
	run(t, newInjector(t, &Config{RouteValidates: true, AdditionalRules: "r"}, "ra3"), ex)
	sys, _ := systemMessages(ex.Body)
	note := ex.Trace.Notes[len(ex.Trace.Notes)-1]
	for _, want := range []string{"knowledge set ra3-corona", "+ contract", "+ additional rules", "system_message merge: 1 client system message(s), 1 with text merged"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	// The size is the composed prompt's, before the client's text was merged.
	if !strings.Contains(note, "prompt ") || strings.Contains(note, "prompt 0 bytes") || len(sys[0]) < 1000 {
		t.Errorf("note %q, prompt of %d bytes", note, len(sys[0]))
	}
}

func TestComposedPromptsAreCachedPerEffectiveSet(t *testing.T) {
	t.Parallel()
	in := newInjector(t, nil, "ra3")
	lib, _ := testLib()
	base, _ := lib.Set("ra3")
	edited, err := base.WithOverlay([]byte(`{"factions":{"盟军":{"entries":[{"id":"AlliedMCV","tags":["vehicle","builder"],"text":"### AlliedMCV\n- 专家修正：可在水上展开。"}]}}}`), "overlay.json")
	if err != nil {
		t.Fatal(err)
	}
	inject := func(set *knowledge.Set, factions ...string) string {
		ex := &interceptors.Exchange{Body: []byte(`{"messages":[{"role":"user","content":"x"}]}`), Trace: interceptors.NewTrace("t")}
		reqcontext.Store(ex, &reqcontext.Context{KnowledgeSet: set.Name, Set: set, Scopes: knowledge.Scopes{"factions": factions},
			Applies: knowledge.Applicability{Domain: true, Contract: true, Reason: "the test says so"}})
		run(t, in, ex)
		sys, _ := systemMessages(ex.Body)
		return sys[0]
	}
	first := inject(base, "盟军")
	if again := inject(base, "盟军"); again != first || in.cache.len() != 1 {
		t.Fatalf("a repeated request was not served from the cache (%d entries)", in.cache.len())
	}
	if other := inject(base, "苏联"); other == first || in.cache.len() != 2 {
		t.Fatalf("other scopes must compose another prompt (%d entries)", in.cache.len())
	}
	if fixed := inject(edited, "盟军"); !strings.Contains(fixed, "专家修正") || strings.Contains(first, "专家修正") || in.cache.len() != 3 {
		t.Fatalf("the overlay's effective set did not get its own prompt")
	}
}

func TestNewValidatesTheConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty.md"), []byte("\n  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := &knowledge.Pack{Name: "bare", Language: "en"}
	tests := []struct {
		name string
		cfg  Config
		pack *knowledge.Pack
		want string
	}{
		{"unknown policy", Config{SystemMessage: "append"}, nil, `system_message: "append" is not merge, replace or keep`},
		{"unknown contract mode", Config{Contract: "sometimes"}, nil, `contract: "sometimes" is not auto, always or never`},
		{"inline and file", Config{AdditionalRules: "x", AdditionalRulesFile: "r.md"}, nil, "additional_rules and additional_rules_file are exclusive"},
		{"missing file", Config{UseCustomSystemPrompt: true, CustomSystemPromptFile: "nope.md"}, nil, "custom_system_prompt_file: open " + filepath.Join(dir, "nope.md")},
		{"empty file", Config{AdditionalRulesFile: "empty.md"}, nil, "additional_rules_file: " + filepath.Join(dir, "empty.md") + " is empty"},
		{"custom prompt that is never used", Config{CustomSystemPrompt: "x"}, nil, "use_custom_system_prompt is false"},
		{"custom prompt switched on without one", Config{UseCustomSystemPrompt: true}, nil, "use_custom_system_prompt: true needs custom_system_prompt"},
		{"contract always without a contract", Config{Contract: ContractAlways}, bare, "contract: always, but pack bare has no claims or answer contract"},
		{"no pack and no custom prompt", Config{}, &knowledge.Pack{}, "the route has no pack"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			deps := testDeps(t, "ra3")
			deps.Resolve = func(p string) string { return filepath.Join(dir, p) }
			if tc.pack != nil {
				deps.Pack = tc.pack
				if tc.pack.Name == "" {
					deps.Pack = nil
				}
			}
			_, err := New(&tc.cfg, deps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// A route without a pack may inject a custom prompt.
	if _, err := New(&Config{UseCustomSystemPrompt: true, CustomSystemPrompt: "x"}, interceptors.Deps{}); err != nil {
		t.Fatalf("custom prompt without a pack: %v", err)
	}
}

func TestCompose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		parts Parts
		want  string
	}{
		{"order and one blank line between parts", Parts{Knowledge: "K\n", Contract: "C\n\n", AdditionalRules: "R"}, "K\n\nC\n\nR"},
		{"blank parts are skipped", Parts{Knowledge: "K", Contract: " \n", AdditionalRules: ""}, "K"},
		{"merged client texts verbatim under the heading", Parts{Knowledge: "K", ClientHeading: "## H", ClientSystem: []string{" a\n", "", "b"}}, "K\n\n## H\n\n a\n\n\nb"},
		{"client texts alone", Parts{ClientHeading: "## H", ClientSystem: []string{"a"}}, "## H\n\na"},
		{"nothing", Parts{ClientHeading: "## H", ClientSystem: []string{""}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Compose(tc.parts); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOnlyRequestsThePackIsAboutGetItsKnowledge(t *testing.T) {
	t.Parallel()
	hello := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
	analysis := `{"model":"m","messages":[{"role":"user","content":"地图: map_mp_2_rao1"}]}`
	jsonAnalysis := `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"地图: map_mp_2_rao1"}]}`
	jsonScene := `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"DM: Roll initiative."}]}`
	tests := []struct {
		name, pack, body string
		when             When
		knowledge        bool // a system message was injected
		contract         bool
	}{
		{"facts: a greeting goes as sent", "ra3", hello, "", false, false},
		{"facts: an analysis gets knowledge and contract", "ra3", analysis, WhenFacts, true, true},
		{"always: a greeting gets the knowledge, not the contract", "ra3", hello, WhenAlways, true, false},
		{"JSON mode: the knowledge, never the claims contract", "ra3", jsonAnalysis, "", true, false},
		{"JSON mode: a pack whose answer is JSON keeps its contract", "dnd", jsonScene, "", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ex := resolved(t, tc.pack, []byte(tc.body))
			run(t, newInjector(t, &Config{When: tc.when, RouteValidates: true}, tc.pack), ex)
			sys, _ := systemMessages(ex.Body)
			if got := len(sys) == 1; got != tc.knowledge {
				t.Fatalf("injected: %v, want %v: %s", got, tc.knowledge, ex.Body)
			}
			if !tc.knowledge {
				if string(ex.Body) != tc.body {
					t.Fatalf("the body changed: %s", ex.Body)
				}
				return
			}
			contract := strings.TrimSpace(contractOf(t, tc.pack))
			if got := strings.Contains(sys[0], contract); got != tc.contract || ex.ContractInjected != tc.contract {
				t.Fatalf("contract in the prompt: %v (Exchange.ContractInjected %v), want %v", got, ex.ContractInjected, tc.contract)
			}
		})
	}
	if _, err := New(&Config{When: "sometimes"}, testDeps(t, "ra3")); err == nil || !strings.Contains(err.Error(), `when: "sometimes" is not facts or always`) {
		t.Fatalf("a bad when: %v", err)
	}
}
