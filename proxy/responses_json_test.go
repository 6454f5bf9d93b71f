package proxy

import (
	"testing"

	"github.com/tidwall/gjson"
)

// rawScanSeeds are JSON texts whose members and elements the raw scanners must
// find exactly as gjson does.
var rawScanSeeds = []string{
	`{"a":1,"b":"x","c":[1,{"d":"]}"}],"e":{"f":null},"g":true}`,
	` { "k" : "quote \" and backslash \\" , "n" : -1.5e3 , "t" : false } `,
	`{"input":[{"role":"user","content":[{"type":"input_text","text":"line\nnext \\\"q\\\" 中文 \u2028"}]}],"x":"\\\\"}`,
	`[1, "two", [3], {"four": 4}, null, "\\", ""]`,
	`{}`, `[]`, `{"a":{}}`, `{"":""}`,
}

func checkRawScan(t *testing.T, js string) {
	t.Helper()
	if !gjson.Valid(js) {
		return
	}
	root := gjson.Parse(js)
	var want, got []string
	if root.IsObject() {
		root.ForEach(func(k, v gjson.Result) bool {
			want = append(want, k.Raw, v.Raw)
			return true
		})
		eachRawMember(js, func(k, raw string) bool {
			got = append(got, `"`+k+`"`, raw)
			return true
		})
	} else if root.IsArray() {
		root.ForEach(func(_, v gjson.Result) bool {
			want = append(want, v.Raw)
			return true
		})
		eachRawElement(js, func(_ int, raw string) bool {
			got = append(got, raw)
			return true
		})
	}
	if len(got) != len(want) {
		t.Fatalf("%s: raw scan %q, gjson %q", js, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: raw scan %q, gjson %q", js, got, want)
		}
	}
}

func TestRawScannersAgreeWithGJSON(t *testing.T) {
	t.Parallel()
	for _, js := range rawScanSeeds {
		checkRawScan(t, js)
	}
	if s := rawString(`"a\"b\u00e9"`); s != `a"bé` {
		t.Errorf("rawString %q", s)
	}
}

func FuzzRawScanners(f *testing.F) {
	for _, js := range rawScanSeeds {
		f.Add(js)
	}
	f.Fuzz(func(t *testing.T, js string) { checkRawScan(t, js) })
}
