package rawjson

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// benchAnswerPath is the answer factgate bench's mock serves: the benchmarks read
// it where the bench embeds it, so they follow it when it changes.
const benchAnswerPath = "../../cmd/factgate/demodata/clean_answer.md"

// chatRequest is a realistic 24 KB chat request: a system prompt, a user message
// carrying a 14-minute RA3 replay's operation log (Chinese and ASCII, a newline
// escape per line), a tool definition with a JSON schema, and the usual options.
func chatRequest(b *testing.B) []byte {
	b.Helper()
	replay, err := os.ReadFile("testdata/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	var req bytes.Buffer
	req.WriteString(`{"model":"ra3-analyst","temperature":0.35,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":`)
	req.Write(AppendString(nil, "你是红色警戒3录像分析师。只根据操作记录回答，引用时间点。"))
	req.WriteString(`},{"role":"user","content":[{"type":"text","text":`)
	req.Write(AppendString(nil, string(replay)))
	req.WriteString(`}]}],"tools":[{"type":"function","function":{"name":"lookup_unit","parameters":{"type":"object","properties":{"unit":{"type":"string"},"faction":{"type":"string","enum":["盟军","苏联","神州"]}},"required":["unit"]}}}],"metadata":{"factgate.knowledge_set":"ra3"}}`)
	if !Valid(req.Bytes(), 0) {
		b.Fatal("the benchmark request is not valid JSON")
	}
	return req.Bytes()
}

// deepWide nests arrays and objects depth levels deep, with numbers, strings and
// literals at every level.
func deepWide(depth int) []byte {
	var b bytes.Buffer
	for i := range depth {
		if i%2 == 0 {
			b.WriteString(`[1,-2.5e3,"x\"y",true,null,`)
		} else {
			b.WriteString(`{"a":{},"b":[],"c":`)
		}
	}
	b.WriteString("0")
	for i := depth - 1; i >= 0; i-- {
		if i%2 == 0 {
			b.WriteString(`]`)
		} else {
			b.WriteString(`}`)
		}
	}
	return b.Bytes()
}

func BenchmarkCheck(b *testing.B) {
	// 400 values nested to the bound in one array: about 1 MB of the worst shape a
	// body within the bound can have.
	wide := []byte("[" + strings.TrimSuffix(strings.Repeat(string(deepWide(DefaultMaxDepth-1))+",", 400), ",") + "]")
	inputs := []struct {
		name string
		in   []byte
	}{
		{"chat request 24KB", chatRequest(b)},
		{"deep and wide 1MB", wide},
		{"16MiB of [", bytes.Repeat([]byte("["), 16<<20)},
	}
	for _, in := range inputs {
		b.Run(in.name+"/rawjson.Check", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				err := Check(in.in, 0)
				if (err == nil) != (in.name != "16MiB of [") {
					b.Fatal(err)
				}
			}
		})
		if in.name == "16MiB of [" {
			continue // gjson overflows the stack; encoding/json stops at 10,000 levels
		}
		b.Run(in.name+"/gjson.ValidBytes", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				if !gjson.ValidBytes(in.in) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(in.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				if !json.Valid(in.in) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

func BenchmarkAppendString(b *testing.B) {
	replay, err := os.ReadFile("testdata/allied_vs_soviet.txt")
	if err != nil {
		b.Fatal(err)
	}
	s := string(replay)
	buf := make([]byte, 0, 2*len(s))
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

// BenchmarkUnescapeAnswer decodes the content of the answer factgate bench's mock
// gives (an analysis with its JSON claims block: an escape every few bytes), as
// the proxy does once per held answer: whole, and through the line decoder that
// reads the heads of user texts.
func BenchmarkUnescapeAnswer(b *testing.B) {
	answer, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		b.Fatal(err)
	}
	raw := AppendString(nil, string(answer))
	inner := string(raw[1 : len(raw)-1])
	buf := make([]byte, 0, len(inner)+8)
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(inner)))
		for b.Loop() {
			buf = AppendUnescape(buf[:0], inner, -1)
		}
	})
	b.Run("line-decoder", func(b *testing.B) {
		b.SetBytes(int64(len(inner)))
		for b.Loop() {
			buf = AppendUnescapeLines(buf[:0], inner, -1, -1)
		}
	})
	if string(buf) != string(answer) {
		b.Fatal("the decoded answer differs")
	}
}

// BenchmarkWalkerStringAnswer reads the content of the answer factgate bench's
// mock gives with a Walker, as a held answer's check does: the string is checked
// and decoded, with the rest of a chat body after it.
func BenchmarkWalkerStringAnswer(b *testing.B) {
	answer, err := os.ReadFile(benchAnswerPath)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"content":` + string(AppendString(nil, string(answer))) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":512,"completion_tokens":64,"total_tokens":576}}`
	const at = len(`{"content":`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var got string
	for b.Loop() {
		w := NewWalker(body, 0)
		got, _ = w.String(at)
	}
	if got != string(answer) {
		b.Fatal("the decoded answer differs")
	}
}
