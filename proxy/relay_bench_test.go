package proxy

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// chatStream is a streamed chat completion as OpenAI sends it: n content
// chunks, a finish chunk, the usage chunk and [DONE].
func chatStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"piece %d of the answer "},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":40,"total_tokens":49}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkEventFramer: what a route without interceptors adds to each streamed
// chat completion (every event checked for data spread over several lines).
func BenchmarkEventFramer(b *testing.B) {
	stream := chatStream(40)
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		f := &eventFramer{r: bytes.NewReader(stream)}
		for {
			if _, err := f.Read(buf); err == io.EOF {
				break
			}
		}
	}
}

// BenchmarkLiveRelayChatEvents: a held route's live relay of the same stream,
// with the usage factgate asked for taken out again (the client did not ask).
func BenchmarkLiveRelayChatEvents(b *testing.B) {
	stream := chatStream(40)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		lr := &liveRelay{stripUsage: true}
		for i := 0; i < len(stream); i += 4096 {
			_ = lr.feed(stream[i:min(i+4096, len(stream))])
		}
		if len(lr.pending) == 0 || len(lr.held) == 0 {
			b.Fatal("nothing relayed")
		}
	}
}

func TestEventFramerPutsEveryEventsDataOnOneLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in, want string }{
		{"one line an event passes byte for byte", "data: {\"a\": 1}\n\n: ping\n\ndata: [DONE]\n\n", "data: {\"a\": 1}\n\n: ping\n\ndata: [DONE]\n\n"},
		{"an event over several data lines", "event: x\ndata: {\ndata:   \"a\": 1\ndata: }\n\ndata: [DONE]\n\n", "event: x\ndata: {\"a\":1}\n\ndata: [DONE]\n\n"},
		{"CRLF line ends", "data: {\r\ndata: \"a\": 1}\r\n\r\ndata: {}\r\n\r\n", "data: {\"a\":1}\n\ndata: {}\r\n\r\n"},
		{"an event the upstream did not end", "data: {}\n\ndata: {\"a\"", "data: {}\n\ndata: {\"a\""},
	} {
		for _, reader := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
			got, err := io.ReadAll(&eventFramer{r: reader(strings.NewReader(tc.in))})
			if err != nil || string(got) != tc.want {
				t.Errorf("%s: %q %v, want %q", tc.desc, got, err, tc.want)
			}
		}
	}
	// A stream whose lines end in a lone CR is passed on as it comes.
	long := strings.Repeat("data: x\r\r", 1000)
	got, err := io.ReadAll(&eventFramer{r: strings.NewReader(long)})
	if err != nil || string(got) != long {
		t.Errorf("a stream with lone CR line ends: %d bytes %v", len(got), err)
	}
	// The upstream's failure comes after what it sent.
	f := &eventFramer{r: io.MultiReader(strings.NewReader("data: {}\n\ndata: {"), iotest.ErrReader(io.ErrUnexpectedEOF))}
	got, err = io.ReadAll(f)
	if string(got) != "data: {}\n\ndata: {" || err != io.ErrUnexpectedEOF {
		t.Errorf("%q %v", got, err)
	}
}
