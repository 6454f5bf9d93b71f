package proxy

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// byteReader hands out its data a few bytes at a time, then err.
type byteReader struct {
	data []byte
	step int
	err  error
}

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestUsageStripper(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", maxUsageLine+10)
	for _, tc := range []struct{ desc, in, want string }{
		{"the usage chunk goes, usage:null leaves the others",
			"data: {\"id\":\"1\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
				"data: {\"id\":\"1\",\"choices\":[],\"usage\":{\"total_tokens\":60}}\n\n" +
				"data: [DONE]\n\n",
			"data: {\"id\":\"1\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n" +
				"data: [DONE]\n\n"},
		{"CRLF line ends and spaces kept",
			"data:  {\"a\": 1, \"usage\": null, \"b\": 2}\r\n\r\n" +
				"data: {\"choices\": [], \"usage\": {\"total_tokens\": 3}}\r\n\r\n",
			"data:  {\"a\": 1, \"b\": 2}\r\n\r\n"},
		{"comments and other fields pass",
			": keep-alive\n\nevent: x\ndata: {\"usage_note\":\"usage\"}\n\n",
			": keep-alive\n\nevent: x\ndata: {\"usage_note\":\"usage\"}\n\n"},
		{"an event longer than the bound passes as it is",
			"data: {\"c\":\"" + big + "\",\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{}}\n\n",
			"data: {\"c\":\"" + big + "\",\"usage\":null}\n\n"},
		{"an unfinished event at the end passes",
			"data: {\"choices\":[],\"usage\":{}}\n\ndata: {\"partial\"",
			"data: {\"partial\""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, step := range []int{1, 7, 4096} {
				got, err := io.ReadAll(newUsageStripper(&byteReader{data: []byte(tc.in), step: step, err: io.EOF}))
				if err != nil || string(got) != tc.want {
					t.Fatalf("step %d: %q %v, want %q", step, got, err, tc.want)
				}
			}
		})
	}
	// A broken upstream: what came passes, then the error.
	broken := errors.New("connection reset")
	got, err := io.ReadAll(newUsageStripper(&byteReader{data: []byte("data: {\"a\":1}\n\ndata: {\"b\""), step: 5, err: broken}))
	if !errors.Is(err, broken) || !bytes.Equal(got, []byte("data: {\"a\":1}\n\ndata: {\"b\"")) {
		t.Fatalf("broken: %q %v", got, err)
	}
}

// BenchmarkUsageStripper: what a limited client's stream pays per event when
// the proxy asked for the usage on its behalf.
func BenchmarkUsageStripper(b *testing.B) {
	event := []byte("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"PlayerA 在 1:24 打包主基地\"},\"finish_reason\":null}],\"usage\":null}\n\n")
	stream := bytes.Repeat(event, 100)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		u := newUsageStripper(bytes.NewReader(stream))
		for {
			if _, err := u.Read(buf); err != nil {
				break
			}
		}
	}
}
