package validate

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

func dndPack(tb testing.TB) *knowledge.Pack {
	tb.Helper()
	p := builtin(tb).Pack("dnd")
	if p == nil {
		tb.Fatal("no built-in dnd pack")
	}
	return p
}

func newShape(tb testing.TB) *ShapeValidator {
	tb.Helper()
	s, err := NewShapeValidator(dndPack(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// issueKeys renders issues as "code|Severity|path".
func issueKeys(issues []interceptors.Issue) []string {
	out := make([]string, len(issues))
	for i, is := range issues {
		out[i] = is.Key()
	}
	return out
}

const cleanScene = `{"kind": "combat", "title": "Goblin ambush", "summary": "The party fights two goblins behind a wagon."}`

func TestShapeValidatorFindsEveryShapeProblem(t *testing.T) {
	t.Parallel()
	s := newShape(t)
	cases := []struct {
		name    string
		content string
		want    []string
	}{
		{"a bare object", cleanScene, nil},
		{"a json fence", "```json\n" + cleanScene + "\n```", nil},
		{"a fence without info string", "```\n" + cleanScene + "\n```\n", nil},
		{"a JSON fence in capitals with four backticks", "````JSON\n" + cleanScene + "\n````", nil},
		{"a fence never closed runs to the end", "```json\n" + cleanScene + "\n", nil},
		{"a byte order mark and white space", "\uFEFF\n  " + cleanScene + "\n\n", nil},
		{"braces inside strings", `{"kind": "narrative", "title": "A } tricky { title", "summary": "He says \"}\" and leaves."}`, nil},
		{"text before the fence", "Here is the scene:\n```json\n" + cleanScene + "\n```", []string{"answer.extra_text|Warning|"}},
		{"text after a bare object", cleanScene + "\nHope this helps!", []string{"answer.extra_text|Warning|"}},
		{"an empty answer", "", []string{"answer.missing|Fatal|"}},
		{"prose only", "The party fights goblins. It is a combat scene.", []string{"answer.missing|Fatal|"}},
		{"two fenced blocks", "```json\n" + cleanScene + "\n```\n```json\n" + cleanScene + "\n```", []string{"answer.multiple|Fatal|"}},
		{"two bare objects", cleanScene + "\n" + cleanScene, []string{"answer.multiple|Fatal|"}},
		{"a trailing comma", `{"kind": "combat", "title": "T", "summary": "S",}`, []string{"answer.json_invalid|Fatal|"}},
		{"an array in the fence", "```json\n[" + cleanScene + "]\n```", []string{"answer.json_invalid|Fatal|"}},
		{"an empty fence", "```json\n```", []string{"answer.json_invalid|Fatal|"}},
		{"a missing title", `{"kind": "combat", "summary": "S"}`, []string{"answer.field_missing|Fatal|title"}},
		{"a numeric kind", `{"kind": 3, "title": "T", "summary": "S"}`, []string{"answer.field_type|Fatal|kind"}},
		{"a null summary", `{"kind": "recap", "title": "T", "summary": null}`, []string{"answer.field_type|Fatal|summary"}},
		{"a kind outside the enum", `{"kind": "battle", "title": "T", "summary": "S"}`, []string{"answer.enum_invalid|Fatal|kind"}},
		{"a kind in another case", `{"kind": "Combat", "title": "T", "summary": "S"}`, []string{"answer.enum_invalid|Fatal|kind"}},
		{"a blank summary", `{"kind": "meta", "title": "Rules talk", "summary": "  "}`, []string{"answer.field_empty|Warning|summary"}},
		{"an unknown field", `{"kind": "meta", "title": "T", "summary": "S", "mood": "tense"}`, []string{"answer.field_unknown|Warning|mood"}},
		{"everything wrong in the fields at once", `{"kind": "", "title": 1, "extra": true}`,
			[]string{"answer.field_missing|Fatal|summary", "answer.field_type|Fatal|title", "answer.enum_invalid|Fatal|kind", "answer.field_unknown|Warning|extra"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := s.Check(tc.content)
			// Check's order is root, then the shape's fields by name, then unknown
			// fields; compare as sets to keep the table readable.
			keys := issueKeys(got)
			slices.Sort(keys)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(keys, want) {
				t.Fatalf("issues = %v, want %v", keys, want)
			}
			for _, is := range got {
				if is.Validator != ShapeValidatorName {
					t.Errorf("%s: validator %q", is.Code, is.Validator)
				}
				if is.Message == "" || is.Recommendation.Text == "" {
					t.Errorf("%s: message %q recommendation %q", is.Code, is.Message, is.Recommendation.Text)
				}
				for _, text := range []string{is.Message, is.Recommendation.Text} {
					if strings.Contains(text, is.Code) || strings.Contains(text, "<no value>") {
						t.Errorf("%s: the text shows the code or a placeholder: %q", is.Code, text)
					}
				}
			}
		})
	}
}

func TestShapeMessagesNameWhatToFix(t *testing.T) {
	t.Parallel()
	s := newShape(t)
	cases := []struct {
		name    string
		content string
		want    []string // substrings of the message + recommendation
	}{
		{"the allowed kinds", `{"kind": "battle", "title": "T", "summary": "S"}`, []string{`"battle"`, "combat, narrative, recap, meta"}},
		{"the missing field and its type", `{"kind": "combat", "summary": "S"}`, []string{`"title"`, "a string"}},
		{"the shape's fields", "no JSON here", []string{"kind, summary, title"}},
		{"what the JSON is instead", "```json\n[1]\n```", []string{"a JSON array"}},
		{"how many objects", cleanScene + cleanScene + cleanScene, []string{"holds 3 JSON objects"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			issues := s.Check(tc.content)
			if len(issues) != 1 {
				t.Fatalf("issues = %v", issueKeys(issues))
			}
			text := issues[0].Message + " " + issues[0].Recommendation.Text
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("%q lacks %q", text, w)
				}
			}
		})
	}
}

func TestLocateAnswerReturnsTheObjectItself(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, content, object string
	}{
		{"bare", cleanScene, cleanScene},
		{"fenced with prose around", "Scene:\n```json\n" + cleanScene + "\n```\nDone.", cleanScene},
		{"inline in prose", "The answer is " + cleanScene + ".", cleanScene},
		{"prose with a non-JSON brace group first", "Kinds are {combat|narrative}. " + cleanScene, cleanScene},
		{"none", "no object", ""},
		{"two", cleanScene + cleanScene, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj, ok := AnswerObject(tc.content)
			if obj != tc.object || ok != (tc.object != "") {
				t.Fatalf("AnswerObject = %q, %v; want %q", obj, ok, tc.object)
			}
		})
	}
}

func TestValidateStageRegistersTheShapeForAnAnswerPack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		pack       string
		request    string
		validators []string
	}{
		{"dnd: the shape only", "dnd", "DM: Roll initiative.", []string{ShapeValidatorName}},
		{"ra3: the claims rules only", "ra3", "地图: map_mp_2_rao1", []string{ValidatorName}},
		{"ra3: nothing for a request that is not an analysis", "ra3", "DM: Roll initiative.", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := New(Config{}, interceptors.Deps{Route: "r", Pack: builtin(t).Pack(tc.pack)})
			if err != nil {
				t.Fatal(err)
			}
			ex := newExchange(tc.request)
			if err := v.OnRequest(context.Background(), ex); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, av := range ex.Validators {
				names = append(names, av.Name())
			}
			if !slices.Equal(names, tc.validators) {
				t.Fatalf("validators = %v, want %v", names, tc.validators)
			}
		})
	}
}

func TestValidateStageChecksADnDDraft(t *testing.T) {
	t.Parallel()
	v, err := New(Config{}, interceptors.Deps{Route: "scenes", Pack: dndPack(t)})
	if err != nil {
		t.Fatal(err)
	}
	ex := newExchange("DM: Roll initiative.")
	if err := v.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	draft := "The goblins attack! It's a combat scene."
	ex.Response = completion(draft)
	before := string(ex.Response.Body)
	if err := v.OnResponse(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	if got := issueKeys(ex.Issues); !slices.Equal(got, []string{"answer.missing|Fatal|"}) {
		t.Fatalf("issues = %v", got)
	}
	if string(ex.Response.Body) != before {
		t.Fatal("validation changed the answer")
	}
	if h := headerValue(ex, HeaderIssues); h != "draft=F1;final=F1;delivered=F1" {
		t.Fatalf("%s = %q", HeaderIssues, h)
	}
}

func TestValidateStageNeedsSomethingToCheck(t *testing.T) {
	t.Parallel()
	p := *dndPack(t)
	p.Answer = nil
	_, err := New(Config{}, interceptors.Deps{Route: "r", Pack: &p})
	if err == nil || !strings.Contains(err.Error(), "neither a claims contract nor an answer shape") {
		t.Fatalf("err = %v", err)
	}
}

func headerValue(ex *interceptors.Exchange, name string) string {
	for _, h := range ex.ResponseHeaders {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

func FuzzLocateAnswer(f *testing.F) {
	for _, seed := range []string{cleanScene, "```json\n" + cleanScene + "\n```", "x {\"a\": \"}\"} y", "````\n{}\n", "{{{", `{"kind":"combat"`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content string) {
		loc := LocateAnswer(content)
		if loc.Object != "" {
			if !gjson.Valid(loc.Object) || !gjson.Parse(loc.Object).IsObject() {
				t.Fatalf("Object %q is not a JSON object", loc.Object)
			}
			if loc.Objects != 1 || loc.Err != "" {
				t.Fatalf("an object with Objects=%d Err=%q", loc.Objects, loc.Err)
			}
		}
	})
}

func BenchmarkShapeCheck(b *testing.B) {
	s := newShape(b)
	content := "```json\n" + cleanScene + "\n```"
	b.ReportAllocs()
	for b.Loop() {
		if issues := s.Check(content); len(issues) != 0 {
			b.Fatal(issues)
		}
	}
}
