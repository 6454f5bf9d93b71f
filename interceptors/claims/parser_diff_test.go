package claims

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
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
	// Read and then refused as strict JSON (a trailing comma, a missing brace).
	`{"eventClaims": [{"event": "e", "evidence": [2]}], "unitClaims": [{"unitId": "x", "evidence": ["a|b"]}],}`,
	`{"unitClaims": [{"unitId": 1, "evidence": ["a|b", 3]}]`,
	// The arrays out of order, with issues in each; a comment holding bars.
	`{"timelineClaims": [{"evidence": ["x"]}, {}, {}, {}], "eventClaims": [{"evidence": [1], "evidenceLevel": "?"}], "unitClaims": [{}]}`,
	`{/* a|b|c */ "unitClaims": [{"unitId": 1, "evidence": ["sell|1:00|2"], "alternatives": "a|b"}]}`,
	// Nesting at the bound and past it, in a field the parser skips.
	`{"unitClaims": [{"x": ` + strings.Repeat("[", MaxDepth-3) + strings.Repeat("]", MaxDepth-3) + `}]}`,
	`{"unitClaims": [{"x": ` + strings.Repeat("[", MaxDepth-2) + strings.Repeat("]", MaxDepth-2) + `}]}`,
	`{"unitClaims": [{"evidence": [` + strings.Repeat("{\"a\":", MaxDepth-4) + `1` + strings.Repeat("}", MaxDepth-4) + `]}]}`,
	`{"unitClaims": [{"evidence": [` + strings.Repeat("{\"a\":", MaxDepth-3) + `1` + strings.Repeat("}", MaxDepth-3) + `]}]}`,
}

// Parse reads every block as the gjson walk before it (parser_ref_test.go) did.
func checkParseAsRef(t *testing.T, p *Parser, content string) {
	t.Helper()
	for _, req := range []Requirement{Optional, Required} {
		got, want := withoutRecords(p.Parse(content, req)), p.refParse(content, req)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q) = %+v\nthe gjson walk gives %+v", content, got, want)
		}
		// ReadIn reads into reused buffers what Parse copies out.
		p.ReadIn(nil, content, req, func(read *Claims) {
			if read := withoutRecords(read); !reflect.DeepEqual(read, want) {
				t.Fatalf("ReadIn(%q) = %+v\nthe gjson walk gives %+v", content, read, want)
			}
		})
	}
}

// withoutRecords is a copy of c without its Records, which the gjson walk
// (written before them) does not fill (nor the kinds it read them with):
// record_diff_test.go checks them.
func withoutRecords(c *Claims) *Claims {
	d := *c
	d.Records = nil
	d.kinds = nil
	return &d
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

// The walk of valid JSON finds the members and elements gjson's ForEach finds, in
// order, and reads every value as gjson did: its raw text, a string's decoded
// value, its type, and a unitId.
func checkWalkAsGjson(t *testing.T, js string) {
	t.Helper()
	w := rawjson.NewWalker(js, MaxDepth)
	var walk func(at int, want gjson.Result) int
	walk = func(at int, want gjson.Result) int {
		got, end := readValue(&w, js, at)
		if got.raw != want.Raw || got.isString() != (want.Type == gjson.String) || got.isNumber() != (want.Type == gjson.Number) ||
			got.text() != refTextOf(want) || got.rawText() != refRawText(want) || jsonType(got.raw) != refJSONType(want) {
			t.Fatalf("readValue at %d = %#v, gjson %#v", at, got, want)
		}
		if id, ok := unitID(got); id != 0 || ok {
			if wid, wok := refUnitID(want); id != wid || ok != wok {
				t.Fatalf("unitID(%s) = %d %v, gjson %d %v", got.raw, id, ok, wid, wok)
			}
		} else if _, wok := refUnitID(want); wok {
			t.Fatalf("unitID(%s) fails, gjson reads it", got.raw)
		}
		var keys []string
		var vals []gjson.Result
		want.ForEach(func(k, v gjson.Result) bool {
			keys, vals = append(keys, k.Str), append(vals, v)
			return true
		})
		n, e := 0, end
		switch {
		case want.IsObject():
			e = w.Members(at, func(key string, v int) int {
				if n >= len(vals) || key != keys[n] { // Members decodes the key
					t.Fatalf("member %d of %s: key %q, gjson %q", n, want.Raw, key, keys)
				}
				n++
				return walk(v, vals[n-1])
			})
		case want.IsArray():
			e = w.Elements(at, func(v int) int {
				if n >= len(vals) {
					t.Fatalf("elements of %s: more than gjson's %d", want.Raw, len(vals))
				}
				n++
				return walk(v, vals[n-1])
			})
		default:
			vals = nil
		}
		if n != len(vals) || e != end {
			t.Fatalf("walk of %s: %d values ending at %d, gjson %d ending at %d", want.Raw, n, e, len(vals), end)
		}
		return end
	}
	at := skipSpace(js, 0)
	if !w.End(walk(at, gjson.Parse(strings.TrimRight(js[at:], " \t\r\n")))) {
		t.Fatalf("the walk of valid JSON %q failed", js)
	}
}

// The walk reads any valid JSON as gjson does (strings with escapes and
// surrogates above all).
func FuzzWalkAsGjson(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add(s)
	}
	for _, s := range []string{
		`"\ud83d\ude00"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800"`, `"\ud800\ud800\udc00"`, `"a\u00e9\n\t\"\\\/\b\f\r"`,
		"\"\xff\xc3\\u0000\"", `[-0, 1e400, -1e-400, 12345678901234567890, 9007199254740993, 1.5E+2, true, false, null]`,
		`{"a\u0000b": {"": []}, "\ud800": "\ud800\u002f"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, js string) {
		if rawjson.ValidString(js, MaxDepth) {
			checkWalkAsGjson(t, js)
		}
	})
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
