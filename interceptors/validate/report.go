package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/factgate/factgate/interceptors"
)

// issueJSON is one issue in the check output: exactly code, severity, path,
// message and recommendation.
type issueJSON struct {
	Code           string                      `json:"code"`
	Severity       interceptors.Severity       `json:"severity"`
	Path           string                      `json:"path"`
	Message        string                      `json:"message"`
	Recommendation interceptors.Recommendation `json:"recommendation"`
}

// MarshalIssues renders the check output {"issues":[{"code","severity","path",
// "message","recommendation"}...]}; the recommendation is the Recommendation
// object ({} when it carries no advice) and "issues" is [] when there are none.
func MarshalIssues(issues []interceptors.Issue) []byte {
	out := struct {
		Issues []issueJSON `json:"issues"`
	}{Issues: make([]issueJSON, len(issues))}
	for i, is := range issues {
		out.Issues[i] = issueJSON{Code: is.Code, Severity: is.Severity, Path: is.Path, Message: is.Message, Recommendation: is.Recommendation}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(out) // strings, ints and a TextMarshaler that never fails
	return bytes.TrimRight(b.Bytes(), "\n")
}

// Failing reports whether the issues fail a check: any Contradiction or Fatal.
func Failing(issues []interceptors.Issue) bool {
	m, ok := interceptors.MaxSeverity(issues)
	return ok && m >= interceptors.Contradiction
}

// WriteText writes a report for people: one line per issue (severity, code, path —
// "(root)" for the root — and message), then a summary line.
func WriteText(w io.Writer, rep *Report) error {
	var b strings.Builder
	for _, is := range rep.Issues {
		path := is.Path
		if path == "" {
			path = "(root)"
		}
		fmt.Fprintf(&b, "%-13s %-30s %-28s %s\n", is.Severity, is.Code, path, is.Message)
	}
	counts := interceptors.CountSeverities(rep.Issues)
	switch n := len(rep.Issues); n {
	case 0:
		b.WriteString("no issues")
	case 1:
		fmt.Fprintf(&b, "1 issue (%s)", counts)
	default:
		fmt.Fprintf(&b, "%d issues (%s)", n, counts)
	}
	if rep.KnowledgeSet != "" {
		fmt.Fprintf(&b, "; knowledge set %s", rep.KnowledgeSet)
	}
	if len(rep.Players) > 0 {
		ps := make([]string, len(rep.Players))
		for i, p := range rep.Players {
			ps[i] = p.Name
			if p.Scope != "" {
				ps[i] += " (" + p.Scope + ")"
			}
		}
		fmt.Fprintf(&b, "; players %s", strings.Join(ps, ", "))
	}
	for _, d := range sortedDims(rep.Scopes) {
		if d == rep.playersDim && len(rep.Players) > 0 {
			continue
		}
		fmt.Fprintf(&b, "; %s %s", d, strings.Join(rep.Scopes[d], ", "))
	}
	switch {
	case rep.Operations == 0 && rep.Records > 0:
		fmt.Fprintf(&b, "; %d records (%s)\n", rep.Records, strings.Join(rep.RecordSets, ", "))
	case rep.Operations == 0:
		b.WriteString("; no facts (no line of the facts is an operation, no record): only format rules applied\n")
	default:
		seg := ""
		if rep.Segments > 1 {
			seg = fmt.Sprintf(" in %d segments", rep.Segments)
		}
		fmt.Fprintf(&b, "; %d operations%s, facts end at %s\n", rep.Operations, seg, interceptors.FormatClock(rep.End))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
