package reqcontext

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// asciiJSON encodes s as Python's json.dumps does by default: non-ASCII as \u escapes.
func asciiJSON(s string) string {
	b, _ := json.Marshal(s)
	var out strings.Builder
	for _, r := range string(b) {
		if r < 0x80 {
			out.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			r1, r2 := (r-0x10000)>>10+0xD800, (r-0x10000)&0x3FF+0xDC00
			out.WriteString(strings.ToLower(jsonEscape(r1) + jsonEscape(r2)))
			continue
		}
		out.WriteString(jsonEscape(r))
	}
	return out.String()
}

func jsonEscape(r rune) string {
	const hex = "0123456789abcdef"
	return `\u` + string([]byte{hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF]})
}

func TestAppliesReadsTheRequestAsTheClientWroteIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body       string
		domain, contract bool
	}{
		{"the marker in a system message", `{"messages":[{"role":"system","content":"最后输出 [机器可读声明]。"},{"role":"user","content":"你好"}]}`, true, true},
		{"the marker escaped as \\u (Python's json.dumps)", `{"messages":[{"role":"system","content":` + asciiJSON("最后输出 [机器可读声明]。") + `},{"role":"user","content":"hi"}]}`, true, true},
		{"the marker in a text part", `{"messages":[{"role":"user","content":[{"type":"text","text":"请输出[机器可读声明]"}]}]}`, true, true},
		{"the marker only in an assistant turn", `{"messages":[{"role":"assistant","content":"[机器可读声明]"},{"role":"user","content":"thanks"}]}`, false, false},
		{"a log escaped as \\u", `{"messages":[{"role":"user","content":` + asciiJSON("地图: map_mp_2_rao1\n1:24.00 Alice 使用 SpecialPower_PackReplaceSelf [UnitId]246") + `}]}`, true, true},
		{"JSON mode", `{"response_format":{"type":"json_schema","json_schema":{}},"messages":[{"role":"user","content":"地图: m"}]}`, true, false},
		{"response_format text is not JSON mode", `{"response_format":{"type":"text"},"messages":[{"role":"user","content":"地图: m"}]}`, true, true},
		{"a greeting", `{"messages":[{"role":"user","content":"Say hello"}]}`, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, staged := range []bool{true, false} {
				ex := &interceptors.Exchange{Body: []byte(tc.body), Trace: interceptors.NewTrace("t")}
				if staged {
					if err := newResolver(t, nil).OnRequest(t.Context(), ex); err != nil {
						t.Fatal(err)
					}
				}
				a := Applies(ex, testDeps(t, "ra3").Pack)
				if a.Domain != tc.domain || a.Contract != tc.contract {
					t.Fatalf("context stage %v: Applies = %+v, want domain %v contract %v", staged, a, tc.domain, tc.contract)
				}
			}
		})
	}
}
