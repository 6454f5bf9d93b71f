package claims

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// benchAnswerPath is the answer factgate bench's mock serves: the benchmarks read
// it where the bench embeds it, so they follow it when it changes.
const benchAnswerPath = "../../cmd/factgate/demodata/clean_answer.md"

// answer18 is an answer with 10 unit, 5 event and 3 timeline claims, 2-3
// structured evidence items each, in the shape the RA3 contract asks for.
func answer18() string {
	var b strings.Builder
	b.WriteString("## 对局概览\nPlayerA（盟军）在 1:24 打包主基地并迁移，中期转型空军。\n\n")
	b.WriteString(ra3Marker + "\n```json\n{\n  \"unitClaims\": [\n")
	for i := range 10 {
		if i > 0 {
			b.WriteString(",\n")
		}
		id := 600 + i
		fmt.Fprintf(&b, `    {
      "unitId": %d,
      "player": "PlayerA",
      "claim": "AlliedAirfield",
      "evidenceLevel": "highly likely",
      "evidence": [
        "produce|5:%02d.00|AlliedFighterAircraft|%d",
        "select|6:%02d.50|%d",
        "power|7:%02d|SpecialPower_UnpackReplaceSelf|%d"
      ],
      "alternatives": ["AlliedWarFactory"],
      "needsConfirmation": ["%d 之后是否生产轰炸机"]
    }`, id, i, id, i, id, i, id, id)
	}
	b.WriteString("\n  ],\n  \"eventClaims\": [\n")
	for i := range 5 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `    {"claim": "PlayerA 第 %d 次迁移", "evidenceLevel": "confirmed", "evidence": ["power|1:%02d.00|SpecialPower_PackReplaceSelf|246", "move|1:%02d.00|2200.0,1500.0,0.0"]}`, i, 20+i, 30+i)
	}
	b.WriteString("\n  ],\n  \"timelineClaims\": [\n")
	for i := range 3 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `    {"claim": "PlayerA 在 9:1%d 生产轰炸机", "evidenceLevel": "possible", "evidence": ["produce|9:1%d.00|AlliedBomberAircraft|655", "select|9:4%d.00|801"]}`, i, i, i)
	}
	b.WriteString("\n  ]\n}\n```\n")
	return b.String()
}

// prose20K is about 20 KB of analysis prose with a few braces and fences.
func prose20K() string {
	para := "PlayerA 在 1:24 打包主基地 {迁移}，随后在 1:41 展开；PlayerB 以起重机扩建并在 10:30 生产基洛夫。\n" +
		"```text\n日志摘录 {x}\n```\n\n"
	return strings.Repeat(para, 20000/len(para)+1)
}

func TestAnswer18Shape(t *testing.T) {
	t.Parallel()
	c := newRA3Parser(t).Parse(answer18(), Required)
	if len(c.Issues) != 0 || len(c.UnitClaims) != 10 || len(c.EventClaims) != 5 || len(c.TimelineClaims) != 3 {
		t.Fatalf("benchmark answer: %d/%d/%d claims, issues %v", len(c.UnitClaims), len(c.EventClaims), len(c.TimelineClaims), issueKeys(c.Issues))
	}
}

func BenchmarkParse18Claims(b *testing.B) {
	p := newRA3Parser(b)
	content := answer18()
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if c := p.Parse(content, Required); len(c.UnitClaims) != 10 {
			b.Fatal("parse failed")
		}
	}
}

func BenchmarkParseTolerantC08(b *testing.B) {
	p := newRA3Parser(b)
	content := loadCase(b, "c08_tolerant_format").Answer
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		p.Parse(content, Required)
	}
}

func BenchmarkLocate20KB(b *testing.B) {
	p := newRA3Parser(b)
	block := "```json\n" + claimsJSON + "\n```\n"
	for _, bc := range []struct{ name, content string }{
		{"marker", prose20K() + ra3Marker + "\n" + block},
		{"fallback", prose20K() + claimsJSON + "\n以上 {例如兵种比例} 不作保证。\n"},
		{"none", prose20K()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.content)))
			b.ReportAllocs()
			for b.Loop() {
				p.Locate(bc.content)
			}
		})
	}
}

func BenchmarkParseEvidence(b *testing.B) {
	p := newRA3Parser(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ParseEvidence("power|1:24.00|SpecialPower_PackReplaceSelf|246"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDowngrade(b *testing.B) {
	p := newRA3Parser(b)
	content := answer18()
	c := p.Parse(content, Required)
	edits := []Edit{{Path: "unitClaims[3]", Level: "possible", AddAlternatives: []string{"AlliedNavalYard"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Downgrade(content, c, edits); err != nil {
			b.Fatal(err)
		}
	}
}

// benchCleanAnswer is the answer `factgate bench` serves (benchAnswerPath):
// seven unit claims after the marker.
func benchCleanAnswer(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func BenchmarkParseBenchAnswer(b *testing.B) {
	p := newRA3Parser(b)
	content := benchCleanAnswer(b)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if c := p.Parse(content, Required); !c.Usable() {
			b.Fatal("parse failed")
		}
	}
}

// BenchmarkReadInBenchAnswer: the read a check makes (ReadIn), into the
// parser's reused buffers.
func BenchmarkReadInBenchAnswer(b *testing.B) {
	p := newRA3Parser(b)
	content := benchCleanAnswer(b)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		p.ReadIn(nil, content, Required, func(c *Claims) {
			if !c.Usable() {
				b.Fatal("parse failed")
			}
		})
	}
}

func BenchmarkLocateBenchAnswer(b *testing.B) {
	p := newRA3Parser(b)
	content := benchCleanAnswer(b)
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if !p.Locate(content).Found {
			b.Fatal("no block")
		}
	}
}

// BenchmarkParse18ClaimsGeneric: the 18-claim answer read by the generic reader
// (what any pack's kinds cost), against BenchmarkParse18Claims's typed reader.
func BenchmarkParse18ClaimsGeneric(b *testing.B) {
	p := newGenericRA3Parser(b)
	content := answer18()
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		if c := p.Parse(content, Required); len(c.Records) != 18 {
			b.Fatal("parse failed")
		}
	}
}

// BenchmarkRecordsFromTyped: what filling Records costs ra3's typed reader on the
// 18-claim answer (a part of BenchmarkParse18Claims).
func BenchmarkRecordsFromTyped(b *testing.B) {
	c := newRA3Parser(b).Parse(answer18(), Required)
	b.ReportAllocs()
	for b.Loop() {
		if recordSink = c.recordsFromTyped(make([]Record, 0, 18)); len(recordSink) != 18 {
			b.Fatal("records")
		}
	}
}

// recordSink keeps the benchmark's records on the heap, as Parse's are.
var recordSink []Record
