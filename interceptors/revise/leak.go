package revise

import (
	"strings"

	"github.com/factgate/factgate/interceptors"
)

// leak reports the first of the pack's leak phrases (case-insensitive) that the
// prose of a revised answer holds more often than the draft's prose: a phrase the
// draft already used ("修订版地图") is the analysis's own wording, not a
// betrayal of the revision. The claims block is not prose and is not searched.
func (r *Revise) leak(draft, revised string) (string, bool) {
	if len(r.leaks) == 0 {
		return "", false
	}
	prose := strings.ToLower(r.stripClaims(revised))
	var before string
	for i, ph := range r.leaks {
		n := strings.Count(prose, ph)
		if n == 0 {
			continue
		}
		if before == "" {
			before = strings.ToLower(r.stripClaims(draft))
		}
		if n > strings.Count(before, ph) {
			return r.pack.Revision.LeakPhrases[r.leakIndex[i]], true
		}
	}
	return "", false
}

// leakIssue is the revision.leak issue for phrase, with the pack's message.
func (r *Revise) leakIssue(phrase string) interceptors.Issue {
	is := interceptors.Issue{
		Code:      CodeLeak,
		Severity:  interceptors.Warning,
		Path:      "",
		Validator: ValidatorName,
		Args:      map[string]string{"phrase": phrase},
		Message:   "the answer mentions its revision or apologises (" + phrase + ")",
	}
	if t, ok, err := r.pack.FormatIssue(CodeLeak, is); ok && err == nil {
		is.Message = t.Message
		is.Recommendation.Text = t.Recommendation
	}
	return is
}
