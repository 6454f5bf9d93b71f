package proxy

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// synthesize renders body as the held stream does and returns the data events.
func synthesize(t *testing.T, body string, chunkRunes int) []string {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeCompletionStream(w, []byte(body), false, chunkRunes); err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, data)
		}
	}
	return events
}

func TestSynthesizedStreamSendsToolCallsAsOpenAIDoes(t *testing.T) {
	t.Parallel()
	body := `{"id":"c1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"巴黎\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"noop","arguments":""}}],"refusal":null},"finish_reason":"tool_calls"}]}`
	var deltas []string
	for _, ev := range synthesize(t, body, 4) {
		if ev == "[DONE]" {
			continue
		}
		ch := gjson.Get(ev, "choices.0")
		deltas = append(deltas, ch.Get("delta").Raw+" "+ch.Get("finish_reason").Raw)
	}
	want := []string{
		`{"role":"assistant","content":null,"refusal":null} null`,
		`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]} null`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]} null`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"ty\":"}}]} null`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"\"巴黎\""}}]} null`,
		`{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]} null`,
		`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"noop","arguments":""}}]} null`,
		`{} "tool_calls"`,
	}
	if strings.Join(deltas, "\n") != strings.Join(want, "\n") {
		t.Fatalf("deltas:\n%s\nwant:\n%s", strings.Join(deltas, "\n"), strings.Join(want, "\n"))
	}
}

func TestSynthesizedStreamInterleavesChoices(t *testing.T) {
	t.Parallel()
	body := `{"id":"c1","created":7,"model":"m","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":"abcdef"},"finish_reason":"stop"},` +
		`{"index":1,"message":{"role":"assistant","content":"xy"},"finish_reason":"length"}]}`
	var got []string
	for _, ev := range synthesize(t, body, 2) {
		if ev == "[DONE]" {
			continue
		}
		ch := gjson.Get(ev, "choices.0")
		got = append(got, ch.Get("index").Raw+":"+ch.Get("delta.content").Str+ch.Get("finish_reason").Str)
	}
	want := "0:,1:,0:ab,1:xy,0:cd,1:length,0:ef,0:stop"
	if strings.Join(got, ",") != want {
		t.Fatalf("events %s\nwant   %s", strings.Join(got, ","), want)
	}
}
