package claims

import (
	"strings"
	"testing"
)

const claimsJSON = `{"unitClaims": [{"unitId": 246, "player": "PlayerA", "claim": "AlliedConstructionYard", "evidenceLevel": "confirmed", "evidence": ["build|0:02.10|AlliedPowerPlant|246"]}]}`

const otherJSON = `{"unitClaims": [{"unitId": 587, "player": "PlayerA", "claim": "AlliedMCV", "evidenceLevel": "possible", "evidence": [], "alternatives": ["AlliedMiner"]}]}`

func TestLocate(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	m := ra3Marker
	tests := []struct {
		name    string
		content string
		// block is the expected content[Span]; "" means not found.
		block  string
		fenced bool
		marker bool
		// fence is the expected content[Fence] when fenced.
		fence string
	}{
		{"json fence after marker", "分析。\n\n" + m + "\n```json\n" + claimsJSON + "\n```\n", claimsJSON + "\n", true, true, "```json\n" + claimsJSON + "\n```"},
		{"upper-case JSON info", m + "\n```JSON\n" + claimsJSON + "\n```", claimsJSON + "\n", true, true, ""},
		{"info with attributes", m + "\n```json title=claims\n" + claimsJSON + "\n```", claimsJSON + "\n", true, true, ""},
		{"no info string", m + "\n```\n" + claimsJSON + "\n```\n", claimsJSON + "\n", true, true, ""},
		{"four backticks hold a three-backtick line", m + "\n````json\n" + claimsJSON + "\n```\n````\n", claimsJSON + "\n```\n", true, true, ""},
		{"closing fence longer than opening", m + "\n```json\n" + claimsJSON + "\n`````\n", claimsJSON + "\n", true, true, ""},
		{"tildes", m + "\n~~~json\n" + claimsJSON + "\n~~~\n", claimsJSON + "\n", true, true, ""},
		{"indented three spaces", m + "\n   ```json\n" + claimsJSON + "\n   ```\n", claimsJSON + "\n", true, true, ""},
		{"unclosed fence runs to the end", m + "\n```json\n" + claimsJSON + "\n", claimsJSON + "\n", true, true, "```json\n" + claimsJSON + "\n"},
		{"unclosed fence without final newline", m + "\n```json\n" + claimsJSON, claimsJSON, true, true, ""},
		{"python fence before the block is skipped", m + "\n```python\nx = {\"unitClaims\": []}\n```\n\n```json\n" + claimsJSON + "\n```\n", claimsJSON + "\n", true, true, ""},
		{"python fence after the block is not json", m + "\n```json\n" + claimsJSON + "\n```\n```python\nprint(1)\n```\n", claimsJSON + "\n", true, true, ""},
		{"two blocks after the marker: last wins", m + "\n```json\n" + otherJSON + "\n```\n\n```json\n" + claimsJSON + "\n```\n", claimsJSON + "\n", true, true, ""},
		{"block before the marker is not after it", "```json\n" + otherJSON + "\n```\n" + m + "\n```json\n" + claimsJSON + "\n```\n", claimsJSON + "\n", true, true, ""},
		{"last marker counts", m + "\n```json\n" + otherJSON + "\n```\n再说一次 " + m + "\n```json\n" + claimsJSON + "\n```\n", claimsJSON + "\n", true, true, ""},
		{"marker without a block falls back to a bare group", "结论如下。\n" + m + "\n" + claimsJSON + "\n", claimsJSON, false, true, ""},
		{"marker with only a non-json fence falls back", m + "\n```text\n" + claimsJSON + "\n```\n", claimsJSON, true, true, "```text\n" + claimsJSON + "\n```"},
		{"empty json fence after the block is no block", m + "\n```json\n" + claimsJSON + "\n```\n```json\n\n```\n", claimsJSON + "\n", true, true, ""},
		{"no marker: fenced block is adopted", "分析。\n```json\n" + claimsJSON + "\n```\n尾声。", claimsJSON, true, false, "```json\n" + claimsJSON + "\n```"},
		{"no marker: bare group", "分析 " + claimsJSON + " 结束", claimsJSON, false, false, ""},
		{"prose braces after the block", m + "\n" + claimsJSON + "\n\n以上声明之外的推测 {例如兵种比例} 不作保证。\n", claimsJSON, false, true, ""},
		{"prose braces after a bare block without marker", claimsJSON + "\n注意 {例如 \"兵种\" 比例} 与 {x}。", claimsJSON, false, false, ""},
		{"braces and escaped quotes inside strings", `结果 {"unitClaims": [{"claim": "a } \" { \\", "unitId": 1}], "eventClaims": []} 完`, `{"unitClaims": [{"claim": "a } \" { \\", "unitId": 1}], "eventClaims": []}`, false, false, ""},
		{"comments with braces inside the group", "x {\n// a } here\n\"unitClaims\": [] /* } */\n} y", "{\n// a } here\n\"unitClaims\": [] /* } */\n}", false, false, ""},
		{"unclosed prose brace before the block", "注意 { 这里没有闭合\n" + claimsJSON + "\n", claimsJSON, false, false, ""},
		{"stray quote in an unclosed prose group", "注意 {他说 \"你好\n" + claimsJSON + "\n", claimsJSON, false, false, ""},
		{"prose group spanning the block", "{注\n" + claimsJSON + "\n完}", claimsJSON, false, false, ""},
		{"wrapper object: the claims object inside", `{"analysis": ` + claimsJSON + `}`, claimsJSON, false, false, ""},
		{"valid block preferred over a later broken mention", claimsJSON + "\n{unitClaims 之后再说}", claimsJSON, false, false, ""},
		{"broken block mentioning claims is still found", "结论 {\"unitClaims\": [ {\"unitId\": 1 \"claim\": \"x\"} ]}", "{\"unitClaims\": [ {\"unitId\": 1 \"claim\": \"x\"} ]}", false, false, ""},
		{"four-space indent is not a fence", m + "\n    ```json\n    " + claimsJSON + "\n    ```\n", claimsJSON, false, true, ""},
		{"backtick info with a backtick is not a fence", m + "\n```json`x\n" + claimsJSON + "\n```\n", claimsJSON, false, true, ""},
		{"CRLF line endings", "分析。\r\n\r\n" + m + "\r\n```json\r\n" + claimsJSON + "\r\n```\r\n", claimsJSON + "\r\n", true, true, "```json\r\n" + claimsJSON + "\r\n```\r"},
		{"BOM before the content", "\uFEFF" + m + "\n```json\n" + claimsJSON + "\n```", claimsJSON + "\n", true, true, ""},
		{"marker inside the block is not the marker", "```json\n{\"unitClaims\": [], \"note\": \"" + m + "\"}\n```\n", "{\"unitClaims\": [], \"note\": \"" + m + "\"}", true, false, ""},
		{"no block at all", "PlayerA 在 1:24 迁移了主基地。\n", "", false, false, ""},
		{"prose braces only", "推测 {例如兵种比例} 不作保证。", "", false, false, ""},
		{"marker only", "分析。\n" + m + "\n", "", false, true, ""},
		{"empty", "", "", false, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc := p.Locate(tc.content)
			if tc.block == "" {
				if loc.Found {
					t.Fatalf("found block %q, want none", tc.content[loc.Span.Start:loc.Span.End])
				}
			} else {
				if !loc.Found {
					t.Fatalf("no block found, want %q", tc.block)
				}
				if got := tc.content[loc.Span.Start:loc.Span.End]; got != tc.block {
					t.Fatalf("block = %q\nwant    %q", got, tc.block)
				}
				if loc.Fenced != tc.fenced {
					t.Errorf("Fenced = %v, want %v", loc.Fenced, tc.fenced)
				}
				if tc.fence != "" {
					if got := tc.content[loc.Fence.Start:loc.Fence.End]; got != tc.fence {
						t.Errorf("fence = %q\nwant    %q", got, tc.fence)
					}
				}
				if !tc.fenced && loc.Fence != loc.Span {
					t.Errorf("unfenced block: Fence %v != Span %v", loc.Fence, loc.Span)
				}
			}
			if loc.Marker != tc.marker {
				t.Fatalf("Marker = %v, want %v", loc.Marker, tc.marker)
			}
			if loc.Marker && tc.content[loc.MarkerSpan.Start:loc.MarkerSpan.End] != m {
				t.Errorf("MarkerSpan %v does not cover the marker", loc.MarkerSpan)
			}
		})
	}
}

// TestLocatePathological feeds inputs that would make a naive scanner quadratic,
// recurse without bound or give up; each must finish (the suite's run time shows
// it) and still find a block that follows the noise.
func TestLocatePathological(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	const mb = 1 << 20
	tests := []struct {
		name    string
		content string
		found   bool
	}{
		{"1 MB of open braces", strings.Repeat("{", mb), false},
		{"1 MB of open braces then the block", strings.Repeat("{", mb) + "\n" + claimsJSON, true},
		{"1 MB of close braces then the block", strings.Repeat("}", mb) + claimsJSON, true},
		{"deep nesting around the block", strings.Repeat(`{"a":`, 100000) + claimsJSON + strings.Repeat("}", 100000), true},
		{"500k tiny groups then the block", strings.Repeat("{}", mb/4) + claimsJSON, true},
		{"many open quotes in a group", "{" + strings.Repeat(`"{`, mb/2), false},
		{"many unclosed comments", "{" + strings.Repeat("/*{", mb/3) + "\n" + claimsJSON, true},
		{"many line comments", "{" + strings.Repeat("//{\n", mb/4) + "}\n" + claimsJSON, true},
		{"1 MB of fence lines", ra3Marker + "\n" + strings.Repeat("```\n", mb/4), false},
		{"10k markers inside the block", ra3Marker + "\n```json\n{\"unitClaims\": [], \"x\": \"" + strings.Repeat(ra3Marker, 10000) + "\"}\n```\n", true},
		{"fence with 1 MB of brackets", ra3Marker + "\n```json\n" + strings.Repeat("[", mb) + "\n```\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := p.Parse(tc.content, Required)
			if c.Found != tc.found {
				t.Fatalf("Found = %v, want %v (issues %v)", c.Found, tc.found, issueKeys(c.Issues))
			}
			if c.Found && !c.Fenced && c.Block != claimsJSON {
				t.Fatalf("block = %.80q..., want the claims block", c.Block)
			}
		})
	}
}
