package claims

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// diffSeeds add shapes the raw walker must read as gjson did: escaped and
// duplicate keys, non-object claims, lone strings for lists, odd numbers and
// white space everywhere.
var diffSeeds = []string{
	"{\"unit\\u0043laims\": [{\"unit\\u0049d\": 3, \"claim\": \"A\\u00e9\", \"claim\": \"B\"}], \"unitClaims\": [{\"unitId\": 9}]}",
	`{"unitClaims": [1, "x", null, [], {}, {"unitId": -1}, {"unitId": 1.0}, {"unitId": 1e2}, {"unitId": "0012"}, {"unitId": true}]}`,
	`{"eventClaims": [{"event": " e ", "claim": "", "evidence": "sell|1:00|2", "needsConfirmation": " one "}, {"evidence": [1, {"a": [2]}, "x|y"]}]}`,
	" { \"timelineClaims\" : [ { \"claim\" : \"t\" , \"evidenceLevel\" : \"Confirmed\" , \"evidence\" : [ ] } , { } ] , \"x\" : { \"unitClaims\" : [] } } ",
	`{"unitClaims": {"0": {"unitId": 1}}, "eventClaims": "x", "timelineClaims": null}`,
	`{"unitClaims": [{"alternatives": ["a", 1, " ", "b\n"], "needsConfirmation": [], "evidenceLevel": 3}]}`,
	`{"unitClaims":[{"unitId":"\ud800","claim":"\ud83d\ude00","evidence":["\"|\\|\/"]}]}`,
}

// Parse reads every block as the gjson walk before it (parser_ref_test.go) did.
func checkParseAsRef(t *testing.T, p *Parser, content string) {
	t.Helper()
	for _, req := range []Requirement{Optional, Required} {
		got, want := p.Parse(content, req), p.refParse(content, req)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q) = %+v\nthe gjson walk gives %+v", content, got, want)
		}
	}
}

func TestParseAsGjsonWalk(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	seeds := append(fuzzSeeds(t), answer18())
	for _, s := range diffSeeds {
		seeds = append(seeds, s, ra3Marker+"\n```json\n"+s+"\n```\n")
	}
	for _, s := range seeds {
		checkParseAsRef(t, p, s)
	}
}

// The walkers find the members and elements gjson's ForEach finds.
func checkWalkAsGjson(t *testing.T, js string) {
	t.Helper()
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.IsObject():
			it := membersOf(v.Raw)
			v.ForEach(func(k, val gjson.Result) bool {
				key, raw, ok := it.next()
				if !ok || k.Str != keyText(key) || raw != val.Raw {
					t.Fatalf("members of %s: got %q %q %v, gjson %q %q", v.Raw, key, raw, ok, k.Str, val.Raw)
				}
				if pv := gjson.Parse(raw); pv.Type != val.Type || pv.Str != val.Str || pv.Num != val.Num || pv.Raw != val.Raw {
					t.Fatalf("gjson.Parse(%q) = %#v, ForEach gave %#v", raw, pv, val)
				}
				walk(val)
				return true
			})
			if key, raw, ok := it.next(); ok {
				t.Fatalf("members of %s: extra %q %q", v.Raw, key, raw)
			}
		case v.IsArray():
			it := elementsOf(v.Raw)
			v.ForEach(func(_, val gjson.Result) bool {
				raw, ok := it.next()
				if !ok || raw != val.Raw {
					t.Fatalf("elements of %s: got %q %v, gjson %q", v.Raw, raw, ok, val.Raw)
				}
				if pv := gjson.Parse(raw); pv.Type != val.Type || pv.Str != val.Str || pv.Num != val.Num || pv.Raw != val.Raw {
					t.Fatalf("gjson.Parse(%q) = %#v, ForEach gave %#v", raw, pv, val)
				}
				walk(val)
				return true
			})
			if raw, ok := it.next(); ok {
				t.Fatalf("elements of %s: extra %q", v.Raw, raw)
			}
		}
	}
	walk(gjson.Parse(js))
}

func keyText(raw string) string {
	if strings.IndexByte(raw, '\\') < 0 {
		return raw
	}
	return gjson.Parse(`"` + raw + `"`).Str
}

func FuzzParseAsGjsonWalk(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	for _, s := range diffSeeds {
		f.Add(s)
	}
	p := newRA3Parser(f)
	f.Fuzz(func(t *testing.T, content string) {
		checkParseAsRef(t, p, content)
		if c := p.Parse(content, Required); c.Valid {
			checkWalkAsGjson(t, c.JSON)
		}
	})
}
