package facts

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// SourceKey returns the cache key of the fact index of texts under rules of
// version rulesVersion: 32 hex digits of a SHA-256 over the encoding format
// version, rulesVersion and the normalised texts.
//
// Normalisation is exactly what extraction ignores, no more: line endings (CRLF or
// LF) and ASCII white space around each line. So a text re-sent with other line
// endings or trailing spaces hits the same index, while any change that could
// change the index (including line numbers, which prose shifts) changes the key.
// It deliberately does not reduce the text to the matched operation lines: that
// would need the regexp pass the cache exists to avoid, for the rare request that
// repeats a log with different prose around it.
//
// The texts are taken as ExtractTexts takes them: in order, with a line break
// between one text and the next, so a log split into messages at a line break
// keys like the unsplit log.
func SourceKey(rulesVersion string, texts ...string) string {
	h := sha256.New()
	buf := make([]byte, 0, 32<<10)
	buf = append(buf, "factgate/facts\x00"...)
	buf = append(buf, encodingVersion)
	buf = binary.AppendUvarint(buf, uint64(len(rulesVersion)))
	buf = append(buf, rulesVersion...)
	flush := func() {
		h.Write(buf)
		buf = buf[:0]
	}
	for _, text := range texts {
		for len(text) > 0 {
			var line string
			if i := strings.IndexByte(text, '\n'); i >= 0 {
				line, text = text[:i], text[i+1:]
			} else {
				line, text = text, ""
			}
			line = trimSpace(line)
			if len(buf)+len(line)+1 > cap(buf) {
				flush()
			}
			if len(line) >= cap(buf) {
				h.Write([]byte(line))
			} else {
				buf = append(buf, line...)
			}
			buf = append(buf, '\n')
		}
	}
	flush()
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}
