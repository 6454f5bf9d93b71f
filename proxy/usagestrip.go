package proxy

import (
	"bytes"
	"io"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// askUsage makes a streamed chat completion (or legacy completion) of a client
// with a token limit ask the upstream for its usage: without
// stream_options.include_usage a stream tells no usage, and the limit would not
// count what it spent. It returns body with include_usage set (edited in place
// with sjson, every other byte kept), and strip true when the client did not
// ask for usage itself — its stream is then relayed through usageStripper, so
// that it receives what it would have without the option. Other requests are
// returned unchanged.
func askUsage(path, body []byte) ([]byte, bool) {
	if string(path) != "/v1/chat/completions" && string(path) != "/v1/completions" {
		return body, false
	}
	if gjson.GetBytes(body, "stream").Type != gjson.True {
		return body, false
	}
	opts := gjson.GetBytes(body, "stream_options")
	switch {
	case opts.Get("include_usage").Type == gjson.True:
		return body, false
	case opts.Exists() && opts.Type != gjson.Null && !opts.IsObject():
		return body, false // not ours to repair: the upstream answers it
	}
	edited, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	if err != nil {
		return body, false
	}
	return edited, true
}

// usageStripper relays a chat completion stream the proxy asked usage for on
// the client's behalf (askUsage) as the client would have received it without
// stream_options.include_usage: the usage chunk (`"choices":[]` with a usage
// object) is dropped, and the `"usage":null` every other chunk then carries is
// deleted from it; every other byte passes as it came. It works on whole
// events (up to the blank line that ends each): an event is held until it is
// complete, and one that outgrows maxUsageLine without ending (it cannot be the
// small usage chunk) passes as it is. The usage itself is read from the
// upstream's bytes before they reach the stripper (usageScanner).
type usageStripper struct {
	r     io.Reader
	event []byte // the event being read, not yet complete
	// lineStart is where the event's current line begins.
	lineStart int
	// passing: the current event outgrew maxUsageLine and is passed as is up to
	// its end; midLine: what passed last did not end its line.
	passing, midLine bool
	out              []byte // what is ready for the client
	buf              []byte // the upstream's bytes of one read
	err              error  // the upstream's error (io.EOF at the end), once out is drained
}

func newUsageStripper(r io.Reader) *usageStripper {
	return &usageStripper{r: r, buf: make([]byte, 32<<10)}
}

// Read implements io.Reader.
func (u *usageStripper) Read(p []byte) (int, error) {
	for len(u.out) == 0 && u.err == nil {
		n, err := u.r.Read(u.buf)
		u.feed(u.buf[:n])
		if err != nil {
			// The end (or a break): what is held goes as it is.
			u.out = append(u.out, u.event...)
			u.event, u.lineStart = u.event[:0], 0
			u.err = err
		}
	}
	if len(u.out) > 0 {
		n := copy(p, u.out)
		u.out = u.out[n:]
		if len(u.out) == 0 {
			u.out = nil
		}
		return n, nil
	}
	return 0, u.err
}

// feed takes the upstream's bytes, line by line, into whole events.
func (u *usageStripper) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part = p[:i+1]
		}
		p = p[len(part):]
		if u.passing {
			u.out = append(u.out, part...)
			if i >= 0 {
				// The event ends at a blank line: one that is all line end.
				if !u.midLine && isBlankLine(part) {
					u.passing = false
				}
				u.midLine = false
			} else {
				u.midLine = true
			}
			continue
		}
		u.event = append(u.event, part...)
		if i < 0 {
			if len(u.event) > maxUsageLine {
				u.out, u.event, u.passing, u.midLine = append(u.out, u.event...), u.event[:0], true, true
			}
			continue
		}
		line := u.event[u.lineStart:]
		switch {
		case isBlankLine(line):
			u.out = appendStripped(u.out, u.event)
			u.event, u.lineStart = u.event[:0], 0
		case len(u.event) > maxUsageLine:
			u.out, u.event, u.lineStart, u.passing, u.midLine = append(u.out, u.event...), u.event[:0], 0, true, false
		default:
			u.lineStart = len(u.event)
		}
	}
}

func isBlankLine(line []byte) bool {
	return len(line) == 1 || len(line) == 2 && line[0] == '\r'
}

// appendStripped appends a whole event to out as the client gets it: nothing
// for the usage chunk, its data lines without "usage":null otherwise.
func appendStripped(out, event []byte) []byte {
	if !bytes.Contains(event, []byte(`"usage"`)) {
		return append(out, event...)
	}
	start := len(out)
	for rest := event; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
			out = append(out, line...)
			continue
		}
		body := bytes.TrimRight(data, "\r\n")
		usage, choices := gjson.GetBytes(body, "usage"), gjson.GetBytes(body, "choices")
		switch {
		case usage.IsObject() && choices.IsArray() && len(choices.Array()) == 0:
			return out[:start] // the usage chunk: the whole event goes
		case usage.Exists() && usage.Type == gjson.Null:
			lead := data[:len(data)-len(bytes.TrimLeft(data, " "))]
			trimmed, err := sjson.DeleteBytes(bytes.TrimLeft(body, " "), "usage")
			if err != nil {
				out = append(out, line...)
				continue
			}
			out = append(out, "data:"...)
			out = append(out, lead...)
			out = append(out, trimmed...)
			out = append(out, data[len(body):]...) // the line's end, as it came
		default:
			out = append(out, line...)
		}
	}
	return out
}
