package proxy

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// headByGjson is the head as the proxy read it before readHead: one gjson.Get per
// member.
func headByGjson(body []byte) requestHead {
	return requestHead{
		model:        gjson.GetBytes(body, "model"),
		stream:       gjson.GetBytes(body, "stream").Bool(),
		includeUsage: gjson.GetBytes(body, "stream_options.include_usage").Bool(),
	}
}

func sameHead(a, b requestHead) bool {
	return a.model.Type == b.model.Type && a.model.Raw == b.model.Raw && a.model.Str == b.model.Str &&
		a.stream == b.stream && a.includeUsage == b.includeUsage
}

func TestReadHeadReadsWhatGjsonReads(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":"\"model\":\"x\""}],"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"first","model":"second","stream":false,"stream":true}`,
		`{"mod\u0065l":"escaped","str\u0065am":true}`,
		`{"model":7,"stream":"true","stream_options":{"include_usage":1}}`,
		`{"model":"","stream":null,"stream_options":[]}`,
		`{"stream_options":{"include_usage":false},"stream_options":{"include_usage":true}}`,
		`{"stream_options":{},"stream_options":{"include_usage":true}}`,
		`{"nested":{"model":"inner","stream":true}}`,
		`["model","m"]`,
		`{}`,
		` { "model" : "spaced" , "stream" : true } `,
	} {
		if !rawjson.Valid([]byte(body), 0) {
			t.Fatalf("test body is not valid JSON: %s", body)
		}
		got, want := readHead([]byte(body)), headByGjson([]byte(body))
		if !sameHead(got, want) {
			t.Errorf("readHead(%s) = model %q (%v) stream %v usage %v; gjson reads model %q (%v) stream %v usage %v", body,
				got.model.Raw, got.model.Type, got.stream, got.includeUsage, want.model.Raw, want.model.Type, want.stream, want.includeUsage)
		}
	}
}

// The head is a copy: editing the body after reading it leaves the model as read.
func TestReadHeadOutlivesTheBody(t *testing.T) {
	body := []byte(`{"model":"ra3-analyst"}`)
	h := readHead(body)
	copy(body[10:], "XXXXXXXXXXX")
	if h.model.Str != "ra3-analyst" {
		t.Fatalf("model changed with the body: %q", h.model.Str)
	}
}

func FuzzReadHead(f *testing.F) {
	f.Add(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`)
	f.Add(`{"model":"a","model":"b","stream":"1"}`)
	f.Fuzz(func(t *testing.T, body string) {
		if !rawjson.Valid([]byte(body), 0) {
			return
		}
		got, want := readHead([]byte(body)), headByGjson([]byte(body))
		if !sameHead(got, want) {
			t.Fatalf("readHead(%q) = %+v; gjson reads %+v", body, got, want)
		}
	})
}
