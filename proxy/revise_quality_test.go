package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/revise"
)

// TestReviseQualityFigures runs every RA3 fixture case that has a Contradiction
// through the proxy twice:
//
//   - with a model that corrects what it is told (its revision answer is the case's
//     answer with the flagged claims corrected or removed, testdata/revise/corrected):
//     the share resolved after one and after two revisions, regressions (issues the
//     draft did not have, unflagged claims lost) and the revision request's size
//     relative to the original request;
//   - with a model that ignores the revision request (it repeats its draft): every
//     flagged claim left in the returned answer must be downgraded.
//
// go test ./proxy -run ReviseQuality -v prints the figures.
func TestReviseQualityFigures(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/revise/cases/*.json")
	if len(files) == 0 {
		t.Fatal("no cases in testdata/revise/cases")
	}
	var total, afterOne, afterTwo, downgraded, regressions int
	var maxRatio, sumRatio float64
	for _, file := range files {
		var c struct {
			ID     string `json:"id"`
			Replay string `json:"replay"`
			Answer string `json:"answer"`
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if c.Replay != "allied_vs_soviet.txt" {
			t.Fatalf("%s: replay %q is not in testdata/revise", c.ID, c.Replay)
		}
		corrected, err := os.ReadFile(filepath.Join("testdata/revise/corrected", c.ID+".md"))
		if err != nil {
			t.Fatalf("%s: no corrected answer: %v", c.ID, err)
		}
		total++

		// A model that corrects what it is told.
		h := newHarness(t, reviseScript(answerJSON{Content: c.Answer}, answerJSON{Content: string(corrected)}), reviseRouteConfig("never", ""))
		status, hdr, body := h.post(t, "/v1/chat/completions", storyRequestWith(replayText))
		if status != 200 {
			t.Fatalf("%s: status %d: %s", c.ID, status, body)
		}
		tr := h.trace(t, hdr.Get("X-Factgate-Trace-Id"))
		draft := tr.Get("attempts.0")
		if !strings.Contains(draft.Get("counts").Str, "C") {
			t.Errorf("%s: the draft has no Contradiction (%s); the case does not belong here", c.ID, draft.Get("counts").Str)
			continue
		}
		final := tr.Get("attempts." + tr.Get("final.attempt").String())
		revisions := len(tr.Get(`attempts.#(kind=="revision")#`).Array())
		switch outcome := tr.Get("final.outcome").Str; {
		case outcome == interceptors.OutcomeResolved && revisions == 1:
			afterOne++
			afterTwo++
		case outcome == interceptors.OutcomeResolved && revisions == 2:
			afterTwo++
		default:
			downgraded++
			t.Logf("%s: not resolved (%s after %d revisions): %s", c.ID, outcome, revisions, final.Get("counts").Str)
		}
		if added := newIssues(draft, final); len(added) > 0 {
			regressions++
			t.Errorf("%s: the returned answer has issues the draft did not: %v", c.ID, added)
		}
		if lost := lostClaims(t, draft, gjson.GetBytes(body, "choices.0.message.content").Str); len(lost) > 0 {
			regressions++
			t.Errorf("%s: unflagged claims lost: %v", c.ID, lost)
		}
		recs := h.mock.Requests()
		if len(recs) >= 2 {
			ratio := float64(len(recs[1].Body)) / float64(len(recs[0].Body))
			sumRatio += ratio
			maxRatio = max(maxRatio, ratio)
		}

		// A model that ignores the revision request.
		h2 := newHarness(t, reviseScript(answerJSON{Content: c.Answer}, answerJSON{Content: c.Answer}), reviseRouteConfig("never", ""))
		status, hdr, body = h2.post(t, "/v1/chat/completions", storyRequestWith(replayText))
		if status != 200 {
			t.Fatalf("%s (stubborn model): status %d", c.ID, status)
		}
		tr2 := h2.trace(t, hdr.Get("X-Factgate-Trace-Id"))
		if o := tr2.Get("final.outcome").Str; o != interceptors.OutcomeDowngraded {
			t.Errorf("%s (stubborn model): outcome %q, want downgraded", c.ID, o)
		}
		final2 := tr2.Get("attempts." + tr2.Get("final.attempt").String())
		assertFlaggedClaimsDowngraded(t, c.ID, gjson.GetBytes(body, "choices.0.message.content").Str, final2, tr2.Get("downgrades"))
	}
	share := func(n int) float64 { return 100 * float64(n) / float64(total) }
	t.Logf("quality figures over %d fixture cases with a Contradiction:", total)
	t.Logf("  resolved after one revision:  %d (%.0f%%)", afterOne, share(afterOne))
	t.Logf("  resolved within two:          %d (%.0f%%)", afterTwo, share(afterTwo))
	t.Logf("  downgraded (unresolved):      %d (%.0f%%)", downgraded, share(downgraded))
	t.Logf("  regressions:                  %d", regressions)
	t.Logf("  revision request / original:  mean %.2fx, max %.2fx", sumRatio/float64(total), maxRatio)
	if share(afterTwo) < 95 {
		t.Errorf("resolved within two revisions: %.0f%%, want at least 95%%", share(afterTwo))
	}
	if maxRatio > 1.3 {
		t.Errorf("a revision request is %.2fx its original, want at most 1.3x", maxRatio)
	}
}

func storyRequestWith(replay string) string {
	b, _ := json.Marshal(map[string]any{
		"model": "ra3-analyst",
		"messages": []map[string]string{
			{"role": "system", "content": "你是红警 3 录像分析助手。"},
			{"role": "user", "content": "分析这局录像。\n\n" + replay},
		},
	})
	return string(b)
}

// newIssues returns the keys of final's issues (above Info) that draft lacks.
func newIssues(draft, final gjson.Result) []string {
	had := map[string]bool{}
	for _, is := range draft.Get("issues").Array() {
		had[issueKey(is)] = true
	}
	var added []string
	for _, is := range final.Get("issues").Array() {
		if is.Get("severity").Str != "Info" && !had[issueKey(is)] {
			added = append(added, issueKey(is))
		}
	}
	return added
}

func issueKey(is gjson.Result) string {
	return is.Get("code").Str + "|" + is.Get("severity").Str + "|" + is.Get("path").Str
}

// lostClaims returns the draft's claims that no issue flagged and the returned
// answer no longer has (unitId+claim, or the claim text).
func lostClaims(t *testing.T, draft gjson.Result, returned string) []string {
	t.Helper()
	flagged := map[string]bool{}
	for _, is := range draft.Get("issues").Array() {
		if is.Get("severity").Str != "Info" {
			flagged[claims.ClaimPath(is.Get("path").Str)] = true
		}
	}
	have := map[string]bool{}
	for _, id := range claimIdentities(t, returned) {
		have[id[1]] = true
	}
	var lost []string
	for _, id := range claimIdentities(t, draft.Get("content").Str) {
		if !flagged[id[0]] && !have[id[1]] {
			lost = append(lost, id[1])
		}
	}
	return lost
}

// claimIdentities returns [path, identity] of every claim in content's block.
func claimIdentities(t *testing.T, content string) [][2]string {
	t.Helper()
	block := claimsBlock(t, content)
	var out [][2]string
	block.Get("unitClaims").ForEach(func(k, v gjson.Result) bool {
		out = append(out, [2]string{"unitClaims[" + k.String() + "]", "unit " + v.Get("unitId").String() + " " + v.Get("claim").Str})
		return true
	})
	for _, field := range []string{"eventClaims", "timelineClaims"} {
		block.Get(field).ForEach(func(k, v gjson.Result) bool {
			out = append(out, [2]string{field + "[" + k.String() + "]", field + " " + v.Get("claim").Str})
			return true
		})
	}
	return out
}

// assertFlaggedClaimsDowngraded checks the invariant on a returned answer: every
// claim the final attempt's issues flag (revise.Downgraded) is removed (the trace's
// downgrades say so, and the claims block has that many fewer claims) or at most at
// the recommended level and lists the recommended alternatives.
func assertFlaggedClaimsDowngraded(t *testing.T, id, content string, final, downgrades gjson.Result) {
	t.Helper()
	block := claimsBlock(t, content)
	removed := map[string]bool{}
	for _, d := range downgrades.Get("#(removed==true)#").Array() {
		removed[d.Get("path").Str] = true
	}
	// position returns where the returned attempt's claim field[i] is in the
	// delivered block: the removed claims before it are gone.
	position := func(field string, i int) int {
		n := i
		for p := range removed {
			f, j, _ := strings.Cut(strings.TrimSuffix(p, "]"), "[")
			if k, _ := strconv.Atoi(j); f == field && k < i {
				n--
			}
		}
		return n
	}
	checked := 0
	for _, raw := range final.Get("issues").Array() {
		var is interceptors.Issue
		if err := json.Unmarshal([]byte(raw.Raw), &is); err != nil {
			t.Fatal(err)
		}
		rec, ok := revise.Downgraded(is, revise.DefaultThreshold)
		if !ok {
			continue
		}
		checked++
		p := claims.ClaimPath(is.Path)
		field, idx, _ := strings.Cut(strings.TrimSuffix(p, "]"), "[")
		if removed[p] {
			if returned := final.Get("content").Str; returned != "" {
				had, has := len(claimsBlock(t, returned).Get(field).Array()), len(block.Get(field).Array())
				if has != had-countIn(removed, field) {
					t.Errorf("%s: flagged claim %s (%s) is recorded removed, but %s went from %d to %d claims", id, p, is.Code, field, had, has)
				}
			}
			continue
		}
		i, _ := strconv.Atoi(idx)
		claim := block.Get(field + "." + strconv.Itoa(position(field, i)))
		level, known := claims.ParseLevel(claim.Get("evidenceLevel").Str)
		if !known || beliefRank(level) > beliefRank(rec) {
			t.Errorf("%s: flagged claim %s (%s) is %q, above the recommended %v", id, p, is.Code, claim.Get("evidenceLevel").Str, rec)
		}
		for _, a := range is.Recommendation.Alternatives {
			found := false
			claim.Get("alternatives").ForEach(func(_, v gjson.Result) bool {
				found = found || strings.TrimSpace(v.Str) == a
				return !found
			})
			if !found {
				t.Errorf("%s: flagged claim %s (%s) lacks the recommended alternative %s", id, p, is.Code, a)
			}
		}
	}
	if checked == 0 {
		t.Errorf("%s: the stubborn model's answer has no flagged claim to check", id)
	}
}

// countIn counts the claim paths of field in set.
func countIn(set map[string]bool, field string) int {
	n := 0
	for p := range set {
		if strings.HasPrefix(p, field+"[") {
			n++
		}
	}
	return n
}

// beliefRank orders levels by how strongly they assert the identity (ruled out
// least), as the downgrade does.
func beliefRank(l claims.Level) int {
	return map[claims.Level]int{claims.RuledOut: 0, claims.Uncertain: 1, claims.Possible: 2, claims.HighlyLikely: 3, claims.Confirmed: 4}[l]
}
