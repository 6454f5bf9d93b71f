package revise

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// revisionData is what the pack's revision template renders for basis: its listed
// issues, numbered, in the pack's language, and the relevant facts.
func (ru *run) revisionData(basis *attempt) knowledge.RevisionData {
	listed := ru.listed(basis)
	data := knowledge.RevisionData{Marker: ru.marker()}
	for i, is := range listed {
		msg, rec := ru.r.issueText(is)
		data.Issues = append(data.Issues, knowledge.RevisionIssue{
			N: i + 1, Code: is.Code, Path: is.Path, Message: msg, Recommendation: rec,
		})
	}
	data.Facts, data.FactsOmitted = RelevantFacts(listed, ru.cfg.factLines)
	return data
}

// issueText is an issue's message and recommendation as the model reads them. The
// validators already render them from the pack's messages; an issue without a
// message (a validator that left it to the pack) is rendered here.
func (r *Revise) issueText(is interceptors.Issue) (msg, rec string) {
	msg, rec = is.Message, is.Recommendation.Text
	if msg != "" {
		return msg, rec
	}
	if t, ok, err := r.pack.FormatIssue(is.Code, is); ok && err == nil {
		msg = t.Message
		if rec == "" {
			rec = t.Recommendation
		}
	}
	if msg == "" {
		msg = is.Code
	}
	return msg, rec
}

// RelevantFacts returns the fact lines a revision request quotes for issues: the
// union of their Facts, each line once, ordered by time (then by first mention),
// and how many were left out to stay within maxLines (maxLines <= 0: no bound).
//
// Over the bound, lines are taken round-robin over the issues in order — every
// issue's first fact, then every issue's second, and so on — so that each issue
// keeps the facts its validator put first, and the most severe issues (listed
// first) win the last places.
func RelevantFacts(issues []interceptors.Issue, maxLines int) (lines []string, omitted int) {
	type factKey struct {
		at   int64
		text string
	}
	seen := map[factKey]int{} // line -> order of first mention
	var all []interceptors.FactLine
	perIssue := make([][]int, len(issues))
	for i, is := range issues {
		for _, f := range is.Facts {
			k := factKey{int64(f.At), f.Text}
			n, ok := seen[k]
			if !ok {
				n = len(all)
				seen[k] = n
				all = append(all, f)
			}
			perIssue[i] = append(perIssue[i], n)
		}
	}
	if len(all) == 0 {
		return nil, 0
	}
	chosen := make([]int, 0, len(all))
	if maxLines <= 0 || len(all) <= maxLines {
		for n := range all {
			chosen = append(chosen, n)
		}
	} else {
		taken := make([]bool, len(all))
		for depth := 0; len(chosen) < maxLines; depth++ {
			progressed := false
			for _, ns := range perIssue {
				if depth >= len(ns) || len(chosen) == maxLines {
					continue
				}
				progressed = true
				if n := ns[depth]; !taken[n] {
					taken[n] = true
					chosen = append(chosen, n)
				}
			}
			if !progressed {
				break
			}
		}
	}
	slices.SortFunc(chosen, func(a, b int) int {
		if all[a].At != all[b].At {
			if all[a].At < all[b].At {
				return -1
			}
			return 1
		}
		return a - b
	})
	lines = make([]string, len(chosen))
	for i, n := range chosen {
		lines[i] = all[n].Text
	}
	return lines, len(all) - len(chosen)
}

// revisionBody builds a hidden request from the original outgoing request (which
// already carries the injected system prompt): its messages, then basis as the
// assistant turn and turn as one user turn; "stream" false, "stream_options"
// removed and "n" 1 (each revision answers one choice); every other field as the
// client sent it, byte for byte.
func revisionBody(original []byte, basis, turn string) ([]byte, error) {
	if !gjson.GetBytes(original, "messages").IsArray() {
		return nil, errors.New(`the request has no "messages" array`)
	}
	body := append(make([]byte, 0, len(original)+len(basis)+len(turn)+256), original...)
	var err error
	for _, m := range [...]struct{ role, content string }{{"assistant", basis}, {"user", turn}} {
		raw, merr := marshalMessage(m.role, m.content)
		if merr != nil {
			return nil, merr
		}
		if body, err = sjson.SetRawBytes(body, "messages.-1", raw); err != nil {
			return nil, fmt.Errorf("adding the %s turn: %w", m.role, err)
		}
	}
	if gjson.GetBytes(body, "stream").Exists() {
		if body, err = sjson.SetRawBytes(body, "stream", []byte("false")); err != nil {
			return nil, fmt.Errorf("setting stream: %w", err)
		}
	}
	if n := gjson.GetBytes(body, "n"); n.Exists() && n.Raw != "1" {
		if body, err = sjson.SetRawBytes(body, "n", []byte("1")); err != nil {
			return nil, fmt.Errorf("setting n: %w", err)
		}
	}
	if gjson.GetBytes(body, "stream_options").Exists() {
		if body, err = sjson.DeleteBytes(body, "stream_options"); err != nil {
			return nil, fmt.Errorf("removing stream_options: %w", err)
		}
	}
	return body, nil
}

// marshalMessage renders {"role":..,"content":..} without HTML escaping, so the
// text the model reads is the text as written.
func marshalMessage(role, content string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, content}); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
