package claims

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
		err  string // substring of the error
	}{
		{"strict JSON unchanged", `{"a": [1, 2], "b": "x"}`, `{"a": [1, 2], "b": "x"}`, ""},
		{"line comment", "{\n// note\n\"a\": 1 // trailing\n}", "{\n\n\"a\": 1 \n}", ""},
		{"block comment", `{"a": /* one */ 1}`, `{"a":   1}`, ""},
		{"trailing comma in object", `{"a": 1,}`, `{"a": 1}`, ""},
		{"trailing comma in array with blanks", "[1, 2 ,\n ]", "[1, 2 \n ]", ""},
		{"trailing comma before a comment", "[1, // x\n]", "[1 \n]", ""},
		{"nested trailing commas", `{"a": [{"b": 1,},],}`, `{"a": [{"b": 1}]}`, ""},
		{"BOM", "\uFEFF{\"a\": 1}", `{"a": 1}`, ""},
		{"comment markers inside strings", `{"u": "http://x/*y*/", "v": "a,]"}`, `{"u": "http://x/*y*/", "v": "a,]"}`, ""},
		{"escaped quote inside string", `{"a": "say \"hi\", // not a comment",}`, `{"a": "say \"hi\", // not a comment"}`, ""},
		{"BOM inside string kept", "{\"a\": \"\uFEFF\"}", "{\"a\": \"\uFEFF\"}", ""},
		{"unterminated string", `{"a": "x}`, "", "unterminated string starting at byte 6"},
		{"unterminated block comment", `{"a": 1 /* x}`, "", "unterminated /* comment starting at byte 8"},
		{"too deep", strings.Repeat("[", MaxDepth+1), "", "nesting deeper than 64"},
		{"deep but allowed", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := NormalizeString(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NormalizeString(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if !gjson.Valid(got) {
				t.Fatalf("result %q is not valid JSON", got)
			}
			b, err := Normalize([]byte(tc.in))
			if err != nil || string(b) != tc.want {
				t.Fatalf("Normalize bytes = %q, %v", b, err)
			}
		})
	}
}

// TestNormalizeCleanUnchanged checks the fast path the parser relies on for
// well-formed blocks: strict JSON comes back as it went in
// (BenchmarkNormalizeClean reports that it costs no allocation).
func TestNormalizeCleanUnchanged(t *testing.T) {
	t.Parallel()
	clean := `{"unitClaims": [{"unitId": 1, "evidence": ["a|b"]}]}`
	got, err := NormalizeString(clean)
	if err != nil || got != clean {
		t.Fatalf("NormalizeString(%q) = %q, %v; want it unchanged", clean, got, err)
	}
}

// BenchmarkNormalizeClean reports the allocations of NormalizeString on strict
// JSON (0 on the fast path).
func BenchmarkNormalizeClean(b *testing.B) {
	clean := `{"unitClaims": [{"unitId": 1, "evidence": ["a|b"]}]}`
	b.ReportAllocs()
	for b.Loop() {
		_, _ = NormalizeString(clean)
	}
}
