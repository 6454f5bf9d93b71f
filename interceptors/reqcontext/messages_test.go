package reqcontext

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// findMessagesByLevels is the walker findMessages replaced, which read the
// messages once per level (array, element, member): the reference of the
// differential tests.
func findMessagesByLevels(s string) (MessageList, bool) {
	arr, ok := rawjson.Find(s, "messages")
	if !ok || arr.Raw[0] != '[' {
		return MessageList{}, false
	}
	ml := MessageList{Start: arr.Off, End: arr.Off + len(arr.Raw)}
	rawjson.EachElement(arr.Raw, func(el rawjson.Value) bool {
		m := Message{Start: arr.Off + el.Off, End: arr.Off + el.Off + len(el.Raw)}
		rawjson.EachMember(el.Raw, func(v rawjson.Member) bool {
			switch {
			case rawjson.KeyIs(v.Key, "role"):
				if r, ok := rawjson.StringValue(v.Raw); ok {
					m.Role = internRole(r)
				}
			case rawjson.KeyIs(v.Key, "content"):
				m.ContentStart = m.Start + v.Off
				m.ContentEnd = m.ContentStart + len(v.Raw)
			}
			return true
		})
		ml.Items = append(ml.Items, m)
		return true
	})
	return ml, true
}

var messageBodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[]}`,
	`{"messages":{}}`,
	`{"messages":null,"x":1}`,
	`{"model":"m"}`,
	`{}`,
	` { "messages" : [ { "role" : "system" , "content" : "a\"b" } , 3 , "s" , { } , null ] , "n" : [1,{"a":"]"}] } `,
	`{"messages":[{"role":"user","content":"x"}],"messages":[{"role":"assistant","content":null}]}`,
	`{"messages":[{"role":"user","content":"x"}],"messages":"no"}`,
	`{"messages":[{"role":"us\u0065r","role":7,"content":[{"type":"text","text":"a"},{"type":"image_url"}],"content":"b"}]}`,
	`{"mess\u0061ges":[{"role":"tool","content":"{\"k\":[1,2]}","name":"t"}],"stream":true}`,
	`{"messages":[{"role":"user","content":"` + strings.Repeat(`line \"q\" \\ \n`, 50) + `"},{"role":"assistant"}]}`,
	`{"metadata":{"factgate.session":"a"},"messages":[],"metadata":{"x":1,"FACTGATE.maps":"m"},"response_format":{"type":"json_object"}}`,
	`{"response_format":{"type":"json_schema"},"messages":[{"role":"user","content":"x"}],"response_format":"text","metadata":null}`,
	`{"metad\u0061ta":{"factgate.Factions":"盟军","factgate.x":[1]},"response_form\u0061t":{"type":"json_object"},"messages":7}`,
}

// checkScanRequest fails when the one walk of scanRequest reads other members
// than looking each up on its own does.
func checkScanRequest(t *testing.T, body string) {
	t.Helper()
	r := scanRequest(body, nil, nil)
	want, wok := findMessagesByLevels(body)
	if r.hasMessages != wok || !reflect.DeepEqual(r.messages, want) {
		t.Fatalf("%.80s: messages\n got %v %+v\nwant %v %+v", body, r.hasMessages, r.messages, wok, want)
	}
	md, _ := rawjson.Find(body, "metadata")
	rf, _ := rawjson.Find(body, "response_format")
	if r.metadata != md.Raw || r.responseFormat != rf.Raw {
		t.Fatalf("%.80s: metadata %q, response_format %q; want %q, %q", body, r.metadata, r.responseFormat, md.Raw, rf.Raw)
	}
	if got, want := factgateMetadataOf(r.metadata), refFactgateMetadata(body); !reflect.DeepEqual(got, want) {
		t.Fatalf("%.80s: factgate metadata\n got %+v\nwant %+v", body, got, want)
	}
	if got, want := jsonFormat(r.responseFormat), IsJSONMode(body); got != want {
		t.Fatalf("%.80s: JSON mode %v, want %v", body, got, want)
	}
}

// TestFindMessagesMatchesTheLevelWalker compares the one-pass walker with the
// walker it replaced on hand-made bodies and the test requests.
func TestFindMessagesMatchesTheLevelWalker(t *testing.T) {
	t.Parallel()
	bodies := append([]string(nil), messageBodies...)
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(data))
	}
	for _, body := range bodies {
		if !rawjson.ValidString(body, 64) {
			t.Fatalf("test body is not valid JSON: %.80s", body)
		}
		got, gok := findMessages(body)
		want, wok := findMessagesByLevels(body)
		if gok != wok || !reflect.DeepEqual(got, want) {
			t.Errorf("%.80s:\n got %v %+v\nwant %v %+v", body, gok, got, wok, want)
		}
		checkScanRequest(t, body)
	}
}

func FuzzFindMessages(f *testing.F) {
	for _, b := range messageBodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !rawjson.ValidString(body, 64) {
			return
		}
		got, gok := findMessages(body)
		want, wok := findMessagesByLevels(body)
		if gok != wok || !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v %+v, want %v %+v", gok, got, wok, want)
		}
		checkScanRequest(t, body)
	})
}

// TestScannedMessages: the context stage's scan serves the body it read, and
// only that slice — not a copy, not the body after the stage stripped its
// metadata, not an exchange without the stage.
func TestScannedMessages(t *testing.T) {
	t.Parallel()
	r := newResolver(t, nil)
	for _, extra := range []string{"", `"metadata":{"factgate.session":"s1","other":1}`} {
		body := chatBody(t, coronaLog, extra)
		ex := &interceptors.Exchange{Route: "test", Original: body, Body: body}
		if _, _, known := ScannedMessages(ex, body); known {
			t.Fatal("a scan before the context stage ran")
		}
		if err := r.OnRequest(context.Background(), ex); err != nil {
			t.Fatal(err)
		}
		want, wok := FindMessages(body)
		got, gok, known := ScannedMessages(ex, ex.Original)
		if !known || gok != wok || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the client's body: %v %v %+v, want %v %+v", extra, known, gok, got, wok, want)
		}
		if _, _, known := ScannedMessages(ex, append([]byte(nil), body...)); known {
			t.Errorf("%s: a copy of the body counts as the scanned slice", extra)
		}
		if _, _, known := ScannedMessages(ex, body[:len(body)-1]); known {
			t.Errorf("%s: a shorter slice counts as the scanned one", extra)
		}
		_, _, known = ScannedMessages(ex, ex.Body)
		if stripped := extra != ""; known == stripped {
			t.Errorf("%s: the outgoing body (stripped: %v) known: %v", extra, stripped, known)
		}
		got, gok = Messages(ex, ex.Body)
		want, wok = FindMessages(ex.Body)
		if gok != wok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Messages of the outgoing body %+v, want %+v", extra, got, want)
		}
	}
}
