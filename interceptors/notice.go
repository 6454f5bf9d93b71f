package interceptors

import "fmt"

// NoticeMode says how the reader learns of the problems that survived in an
// answer (revise.notice, and an A/B variant's notice override).
type NoticeMode string

// The notice modes. The zero value means the pack's default (NoticeAppend when the
// pack has a notice template, else NoticeNone).
const (
	// NoticeNone sends no notice; the trace still records it.
	NoticeNone NoticeMode = "none"
	// NoticeAppend adds the notice to the answer's content, after its text (before
	// a claims block that is kept). An answer that must be JSON — a JSON-mode
	// request, or a pack whose answer is a JSON object — gets it in the header.
	NoticeAppend NoticeMode = "append"
	// NoticeHeader sends it only in the X-Factgate-Notice response header.
	NoticeHeader NoticeMode = "header"
)

// ParseNoticeMode reads a notice mode ("none", "append", "header").
func ParseNoticeMode(s string) (NoticeMode, error) {
	switch m := NoticeMode(s); m {
	case NoticeNone, NoticeAppend, NoticeHeader:
		return m, nil
	}
	return "", fmt.Errorf("unknown notice mode %q (want none, append or header)", s)
}
