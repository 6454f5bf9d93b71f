package claims

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// fuzzSeeds are the fixture answers and the tricky shapes of the table tests.
func fuzzSeeds(tb testing.TB) []string {
	seeds := []string{
		claimsJSON,
		fenced("分析。", claimsJSON),
		"分析。\n" + ra3Marker + "\n```json\n" + claimsJSON,
		"\uFEFF" + ra3Marker + "\r\n```JSON\r\n{\r\n// c\r\n\"unitClaims\": [{\"unitId\": \"7\",},],\r\n}\r\n```\r\n",
		ra3Marker + "\n````\n" + claimsJSON + "\n```\n````\n{例如}",
		ra3Marker + "\n```python\n{\"unitClaims\": []}\n```\n~~~json\n" + otherJSON + "\n~~~\n",
		`结果 {"unitClaims": [{"claim": "a } \" { \\", "unitId": 1}], "eventClaims": [{"event": "x", "evidence": "sell|1:00|2"}]} 完 {注`,
		"{注 \"x\n" + claimsJSON + "\n/* 未闭合 {",
		`{"analysis": {"unitClaims": [{"unitId": 1e3, "evidenceLevel": "RULED-OUT", "alternatives": "x"}]}}`,
		strings.Repeat("{", 100) + claimsJSON,
		ra3Marker + "\n```json\n[1, 2]\n```",
	}
	for _, c := range loadCases(tb) {
		seeds = append(seeds, c.Answer)
	}
	return seeds
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	p := newRA3Parser(f)
	f.Fuzz(func(t *testing.T, content string) {
		c := p.Parse(content, Required)
		if c.Found {
			if !c.Span.in(len(content)) || !c.Fence.in(len(content)) || c.Fence.Start > c.Span.Start || c.Span.End > c.Fence.End {
				t.Fatalf("spans out of range: span %v fence %v len %d", c.Span, c.Fence, len(content))
			}
			if content[c.Span.Start:c.Span.End] != c.Block {
				t.Fatalf("Block is not content[Span]")
			}
		} else if len(c.Issues) != 1 || c.Issues[0].Code != CodeMissing {
			t.Fatalf("no block but issues %v", issueKeys(c.Issues))
		}
		if c.Marker {
			if !c.MarkerSpan.in(len(content)) || content[c.MarkerSpan.Start:c.MarkerSpan.End] != ra3Marker {
				t.Fatalf("MarkerSpan %v does not cover the marker", c.MarkerSpan)
			}
			if c.Found && c.MarkerSpan.End > c.Fence.Start && c.MarkerSpan.Start < c.Fence.End {
				t.Fatalf("marker %v inside the block %v", c.MarkerSpan, c.Fence)
			}
		}
		if len(c.UnitClaims) > p.Cap(UnitClaimsField) || len(c.EventClaims) > p.Cap(EventClaimsField) || len(c.TimelineClaims) > p.Cap(TimelineClaimsField) {
			t.Fatalf("caps exceeded")
		}
		if s := Strip(content, c); len(s) > len(content) {
			t.Fatalf("Strip grew the content from %d to %d bytes", len(content), len(s))
		}
		if !c.Usable() || len(c.UnitClaims) == 0 || !gjson.Get(c.JSON, "unitClaims.0").IsObject() {
			return
		}
		out, err := Downgrade(content, c, []Edit{{Path: "unitClaims[0]", Level: "possible", AddAlternatives: []string{"FuzzAlternative"}}})
		if err != nil {
			t.Fatalf("Downgrade: %v", err)
		}
		if out[:c.Span.Start] != content[:c.Span.Start] || out[len(out)-(len(content)-c.Span.End):] != content[c.Span.End:] {
			t.Fatalf("Downgrade changed the prose")
		}
		again := p.Parse(out, Required)
		if !again.Usable() || len(again.UnitClaims) == 0 {
			t.Fatalf("downgraded answer does not parse: %v\n%q", issueKeys(again.Issues), out)
		}
		if u := again.UnitClaims[0]; u.Level != Possible || !containsString(u.Alternatives, "FuzzAlternative") {
			t.Fatalf("downgrade lost: level %v alternatives %q\n%q", u.Level, u.Alternatives, out)
		}
	})
}

func FuzzParseEvidence(f *testing.F) {
	for _, s := range []string{
		"build|0:02.10|AlliedPowerPlant|246", "place|0:07.80|AlliedPowerPlant|246|1204.5,880.0,12.0",
		"produce|9:10|A|655", "sell|3:10.00|512", " SELECT | 01:24.0 | 587 ", "move|1:31|2200.0,1500.0,0.0",
		"power|1:02:03.5|SpecialPower_PackReplaceSelf|246", "power|1:24| |246", "1:23 选择了 904", "|||", "sell|1:60|5",
	} {
		f.Add(s)
	}
	p := newRA3Parser(f)
	arity := map[string]int{}
	for typ, params := range ra3Evidence() {
		arity[typ] = len(params)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ev, err := p.ParseEvidence(raw)
		if ev.Raw != raw {
			t.Fatalf("Raw = %q, want %q", ev.Raw, raw)
		}
		if (err == nil) != ev.Structured {
			t.Fatalf("Structured = %v with error %v", ev.Structured, err)
		}
		if !ev.Structured {
			return
		}
		if n, ok := arity[ev.Type]; !ok || len(ev.Params) != n || ev.Time < 0 {
			t.Fatalf("structured %+v breaks the declared arity", ev)
		}
		again, err := p.ParseEvidence(ev.Type + "|" + ev.TimeRaw + "|" + strings.Join(ev.Params, "|"))
		if err != nil || again.Time != ev.Time || strings.Join(again.Params, "|") != strings.Join(ev.Params, "|") {
			t.Fatalf("re-joined evidence parses differently: %+v, %v", again, err)
		}
	})
}

func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := NormalizeString(s)
		if err != nil {
			return
		}
		if len(out) > len(s) {
			t.Fatalf("Normalize grew %d to %d bytes", len(s), len(out))
		}
		if gjson.Valid(s) && out != s {
			t.Fatalf("Normalize changed strict JSON %q into %q", s, out)
		}
		// Strict JSON is a fixed point (invalid input such as ",,]" need not be).
		if !gjson.Valid(out) {
			return
		}
		if again, err := NormalizeString(out); err != nil || again != out {
			t.Fatalf("Normalize is not idempotent: %q -> %q -> %q (%v)", s, out, again, err)
		}
	})
}
