package reqcontext

import "unsafe"

// bytesView returns b as a string without copying, so that rawjson's walker finds
// the messages of a request carrying a long operation log without copying the
// body. The string must not outlive b or be kept after b is edited; copy what is
// kept (strings.Clone).
//
// unsafe: a string over b without a copy, read only while b is unchanged (docs/architecture.md, Lifetimes).
func bytesView(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
