package claims

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// ordersContract declares two kinds of another domain.
func ordersContract() *knowledge.ClaimsContract {
	order := knowledge.ClaimKind{Name: "orderClaims", Cap: 2, Fields: map[string]knowledge.FieldType{
		"order": "string", "qty": "int", "amount": "number", "paid": "bool", "placed": "date", "at": "clock",
		"claim": "string", "evidenceLevel": "level", "evidence": "evidence", "alternatives": "strings",
	}, FieldOrder: []string{"order", "qty", "amount", "paid", "placed", "at", "claim", "evidenceLevel", "evidence", "alternatives"},
		Required: []string{"order", "claim"},
		Codes:    map[string]knowledge.MissingCode{"order": {Code: "order.missing_id", Args: map[string]string{"claim": "claim"}, ArgOrder: []string{"claim"}}},
		Aliases:  map[string][]string{"claim": {"status"}}, AliasOrder: []string{"claim"},
	}
	note := knowledge.ClaimKind{Name: "noteClaims", Fields: map[string]knowledge.FieldType{"text": "string"}, FieldOrder: []string{"text"}, Required: []string{"text"}}
	return &knowledge.ClaimsContract{Marker: "[claims]", Kinds: knowledge.ClaimKinds{order, note},
		Levels: map[string][]string{"confirmed": {"sure"}}}
}

func newOrdersParser(tb testing.TB) *Parser {
	tb.Helper()
	p, err := NewParser(ordersContract(), map[string][]string{"order": {"id"}})
	if err != nil {
		tb.Fatal(err)
	}
	if p.typed {
		tb.Fatal("another domain's kinds take the typed path")
	}
	return p
}

func TestGenericReaderReadsDeclaredKinds(t *testing.T) {
	t.Parallel()
	p := newOrdersParser(t)
	answer := "Your order shipped.\n\n[claims]\n```json\n{\n" +
		`"noteClaims": [{"text": " hello "}, {}],` + "\n" +
		`"orderClaims": [{"order": "A1", "qty": "3", "amount": 12.5, "paid": "TRUE", "placed": "2026-03-01", "at": "1:24",` +
		` "status": "shipped", "evidenceLevel": "sure", "evidence": "order|0:00|A1", "alternatives": ["x", " "],},` +
		` {"qty": 1.5, "claim": "late", "evidenceLevel": "maybe"}, {"order": "A3"}],` + "\n}\n```\n"
	c := p.Parse(answer, Required)
	if !c.Usable() || len(c.UnitClaims)+len(c.EventClaims)+len(c.TimelineClaims) != 0 {
		t.Fatalf("parse: %+v", c)
	}
	var paths []string
	for _, r := range c.Records {
		paths = append(paths, r.Path)
	}
	// Declaration order, not the block's.
	if got := strings.Join(paths, " "); got != "orderClaims[0] orderClaims[1] noteClaims[0] noteClaims[1]" {
		t.Fatalf("records %s", got)
	}
	r := c.Records[0]
	want := map[string]any{"order": "A1", "qty": int64(3), "amount": 12.5, "paid": true,
		"placed": time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), "at": 84 * time.Second, "claim": "shipped",
		"evidenceLevel": "confirmed", "alternatives": []string{"x"}}
	for f, w := range want {
		if v, ok := r.Field(f); !ok || !reflect.DeepEqual(v, w) {
			t.Errorf("%s = %#v %v, want %#v", f, v, ok, w)
		}
	}
	if r.Level != Confirmed || !r.LevelKnown || len(r.Evidence) != 1 || !r.Evidence[0].Structured || r.Evidence[0].Path != "orderClaims[0].evidence[0]" {
		t.Errorf("record 0 = %+v", r)
	}
	if _, ok := c.Records[1].Field("qty"); ok || c.Records[1].FieldText("qty") != "1.5" {
		t.Errorf("qty 1.5 reads as an int")
	}
	got := orderedKeys(c.Issues)
	wantIssues := []string{
		"claims.field_alias@orderClaims[0]",
		"claims.unknown_evidence_level@orderClaims[1]",
		"order.missing_id@orderClaims[1]",
		"claims.truncated@orderClaims",
		"claims.missing_field@noteClaims[1]",
	}
	if !reflect.DeepEqual(got, wantIssues) {
		t.Fatalf("issues %v\nwant %v", got, wantIssues)
	}
	for _, is := range c.Issues {
		switch is.Code {
		case "order.missing_id":
			if !reflect.DeepEqual(is.Args, map[string]string{"claim": "late"}) {
				t.Errorf("order.missing_id args %v", is.Args)
			}
		case CodeMissingField:
			if !reflect.DeepEqual(is.Args, map[string]string{"kind": "noteClaims", "field": "text", "claim": ""}) {
				t.Errorf("missing_field args %v", is.Args)
			}
		case CodeFieldAlias:
			if is.Args["alias"] != "status" || is.Args["field"] != "claim" {
				t.Errorf("alias args %v", is.Args)
			}
		}
	}
	if p.Cap("orderClaims") != 2 || p.Cap("noteClaims") != knowledge.DefaultClaimKindCap || p.Cap("unitClaims") != 0 {
		t.Errorf("caps %d %d %d", p.Cap("orderClaims"), p.Cap("noteClaims"), p.Cap("unitClaims"))
	}
}

func TestGenericReaderTolerance(t *testing.T) {
	t.Parallel()
	p := newOrdersParser(t)
	for _, tc := range []struct {
		name, answer string
		records      int
		issues       []string
	}{
		{"missing arrays", "[claims]\n```json\n{}\n```", 0, nil},
		{"an array that is not one", "[claims]\n```json\n{\"orderClaims\": {\"order\": \"A\"}, \"noteClaims\": [{\"text\": \"t\"}]}\n```", 1, nil},
		{"first occurrence counts", "[claims]\n```json\n{\"noteClaims\": 1, \"noteClaims\": [{\"text\": \"t\"}]}\n```", 0, nil},
		{"a non-object item", "[claims]\n```json\n{\"noteClaims\": [\"t\"]}\n```", 1, []string{"claims.missing_field@noteClaims[0]"}},
		{"a comment and trailing commas", "[claims]\n```json\n{/* c */ \"noteClaims\": [{\"text\": \"t\",},],}\n```", 1, nil},
		{"invalid", "[claims]\n```json\n{\"noteClaims\": [\n```", 0, []string{"claims.json_invalid@"}},
		{"not an object", "[claims]\n```json\n[1]\n```", 0, []string{"claims.root_not_object@"}},
	} {
		c := p.Parse(tc.answer, Required)
		if len(c.Records) != tc.records || !reflect.DeepEqual(orderedKeys(c.Issues), tc.issues) && len(tc.issues)+len(c.Issues) > 0 {
			t.Errorf("%s: %d records, issues %v; want %d, %v", tc.name, len(c.Records), orderedKeys(c.Issues), tc.records, tc.issues)
		}
		var kept []Record
		p.ReadIn(nil, tc.answer, Required, func(read *Claims) { kept = read.Records })
		if len(kept) != tc.records {
			t.Errorf("%s: ReadIn gives %d records", tc.name, len(kept))
		}
	}
}

func TestConvertFieldTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  knowledge.FieldType
		raw  string
		want any
	}{
		{"int", `-3`, int64(-3)}, {"int", `"+4"`, int64(4)}, {"int", `2.0`, int64(2)}, {"int", `"2.0"`, nil}, {"int", `true`, nil},
		{"id", `-3`, nil}, {"id", `"007"`, int64(7)},
		{"number", `"1e2"`, 100.0}, {"number", `1e999`, nil}, {"number", `null`, nil},
		{"bool", `false`, false}, {"bool", `"False "`, false}, {"bool", `1`, nil},
		{"date", `"2026-03-01T10:00:00+02:00"`, time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)}, {"date", `"01/03/2026"`, nil},
		{"clock", `"1:02:03"`, time.Hour + 2*time.Minute + 3*time.Second}, {"clock", `90`, 90 * time.Second},
		{"string", `" x "`, "x"}, {"string", `5`, nil}, {"string", `"  "`, nil},
	} {
		v := value{raw: tc.raw}
		if tc.raw[0] == '"' {
			v.str = tc.raw[1 : len(tc.raw)-1]
		}
		got, ok := convert(tc.typ, v)
		if tc.want == nil {
			if ok {
				t.Errorf("%s %s = %#v, want none", tc.typ, tc.raw, got)
			}
			continue
		}
		if tm, isTime := got.(time.Time); isTime {
			got = tm.UTC()
		}
		if !ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s = %#v %v, want %#v", tc.typ, tc.raw, got, ok, tc.want)
		}
	}
}

// orderedKeys are the issues' code@path, in order.
func orderedKeys(issues []interceptors.Issue) []string {
	var out []string
	for _, is := range issues {
		out = append(out, is.Code+"@"+is.Path)
	}
	return out
}

func TestDowngradeAnyDeclaredKind(t *testing.T) {
	t.Parallel()
	p := newOrdersParser(t)
	answer := "Prose stays.\n\n[claims]\n```json\n{\n  \"noteClaims\": [{\"text\": \"n\"}],\n  \"orderClaims\": [\n" +
		`    {"order": "A1", "claim": "shipped", "evidenceLevel": "confirmed", "evidence": ["order|0:00|A1", "order|0:01|A2"]},` + "\n" +
		`    {"order": "A2", "claim": "refunded", "evidenceLevel": "sure"}` + "\n  ]\n}\n```\n"
	c := p.Parse(answer, Required)
	out, err := Downgrade(answer, c, []Edit{
		{Path: "orderClaims[0]", Level: "possible", RemoveEvidence: []int{1}, AddAlternatives: []string{"pending"}},
		{Path: "orderClaims[1]", Remove: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "Prose stays.\n\n[claims]\n```json\n") {
		t.Fatalf("the prose changed:\n%s", out)
	}
	again := p.Parse(out, Required)
	if len(again.Records) != 2 || again.Records[0].Path != "orderClaims[0]" || again.Records[0].Level != Possible ||
		len(again.Records[0].Evidence) != 1 || again.Records[0].Evidence[0].Raw != "order|0:00|A1" {
		t.Fatalf("downgraded block:\n%s", out)
	}
	if alts, _ := again.Records[0].Field("alternatives"); !reflect.DeepEqual(alts, []string{"pending"}) {
		t.Errorf("alternatives = %v", alts)
	}
	for _, tc := range []struct {
		edit Edit
		want string
	}{
		{Edit{Path: "orderClaims[0]", AddNeedsConfirmation: []string{"x"}}, "orderClaims declares no needsConfirmation"},
		{Edit{Path: "noteClaims[0]", Level: "possible"}, "noteClaims declares no level field"},
		{Edit{Path: "noteClaims[0]", Player: "p"}, "noteClaims declares no player"},
		{Edit{Path: "unitClaims[0]", Level: "possible"}, "is not a claim path like orderClaims[2]"},
		{Edit{Path: "orderClaims[2]", Remove: true}, "no such claim (2 kept in orderClaims)"},
	} {
		if _, err := Downgrade(answer, c, []Edit{tc.edit}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.edit, err, tc.want)
		}
	}
	if r := c.Records[2]; r.Declares("text") != knowledge.FieldString || r.Declares("order") != "" || r.HasLevel() {
		t.Errorf("noteClaims declares %q %q %v", r.Declares("text"), r.Declares("order"), r.HasLevel())
	}
	if got := p.Required("orderClaims"); !reflect.DeepEqual(got, []string{"order", "claim"}) {
		t.Errorf("required = %v", got)
	}
}

// Without a marker the fallback finds a block by the declared kinds' arrays.
func TestGenericFallbackFindsDeclaredArrays(t *testing.T) {
	t.Parallel()
	p := newOrdersParser(t)
	c := p.Parse(`Done {"orderClaims": [{"order": "A1", "claim": "x"}]} then {"unitClaims": []} {注`, Required)
	if !c.Usable() || len(c.Records) != 1 || c.Records[0].Path != "orderClaims[0]" {
		t.Fatalf("fallback: %+v", c)
	}
}

func FuzzGenericReader(f *testing.F) {
	f.Add("[claims]\n```json\n{\"orderClaims\": [{\"order\": \"A1\", \"qty\": 2, \"claim\": \"x\", \"evidence\": [\"order|0:00|A1\"]}], \"noteClaims\": [{}]}\n```")
	f.Add(`{"noteClaims": [1, {"text": " "}], "orderClaims": [{"status": "s", "placed": "2026-01-01", "paid": "true"}, {}, {}]}`)
	for _, s := range diffSeeds {
		f.Add(strings.ReplaceAll(strings.ReplaceAll(s, "unitClaims", "orderClaims"), "eventClaims", "noteClaims"))
	}
	p := newOrdersParser(f)
	f.Fuzz(func(t *testing.T, content string) {
		c := p.Parse(content, Required)
		if !c.Valid && len(c.Records) > 0 {
			t.Fatalf("records of an invalid block")
		}
		counts := map[string]int{}
		last := -1
		for i := range c.Records {
			r := &c.Records[i]
			ki := p.kindIndex(r.Kind)
			if ki < last || ki < 0 {
				t.Fatalf("records out of declaration order: %s after kind %d", r.Path, last)
			}
			last = ki
			if r.Index != counts[r.Kind] || r.Path != r.Kind+"["+strconv.Itoa(r.Index)+"]" {
				t.Fatalf("record %d: index %d path %s", i, r.Index, r.Path)
			}
			counts[r.Kind]++
			if counts[r.Kind] > p.Cap(r.Kind) {
				t.Fatalf("%s over its cap", r.Kind)
			}
			for _, e := range r.Evidence {
				if !strings.HasPrefix(e.Path, r.Path+".evidence[") {
					t.Fatalf("evidence path %s in %s", e.Path, r.Path)
				}
			}
		}
		p.ReadIn(nil, content, Required, func(read *Claims) {
			if len(read.Records) != len(c.Records) || !reflect.DeepEqual(orderedKeys(read.Issues), orderedKeys(c.Issues)) {
				t.Fatalf("ReadIn differs from Parse")
			}
		})
		// Removing every claim leaves a block that reads with no claims.
		if c.Usable() && len(c.Records) > 0 {
			var edits []Edit
			for _, r := range c.Records {
				edits = append(edits, Edit{Path: r.Path, Remove: true})
			}
			out, err := Downgrade(content, c, edits)
			if err != nil {
				if strings.Contains(err.Error(), "not a JSON object") {
					return
				}
				t.Fatalf("Downgrade: %v", err)
			}
			// Only the claims past a cap (never kept, never edited) stay.
			dropped := 0
			for _, is := range c.Issues {
				if is.Code == CodeTruncated {
					n, _ := strconv.Atoi(is.Args["count"])
					m, _ := strconv.Atoi(is.Args["cap"])
					dropped += min(n-m, m)
				}
			}
			if again := p.Parse(out, Required); len(again.Records) > dropped && again.Usable() {
				t.Fatalf("claims left after removing all: %d\n%s", len(again.Records), out)
			}
		}
	})
}
