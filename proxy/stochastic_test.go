package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/revise"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/proxy/mockupstream"
)

// stochasticRun is one request of TestStochasticAnalystThroughTheProxy as the
// client and the trace saw it.
type stochasticRun struct {
	outcome              string
	draft, returned      []interceptors.Issue // as the proxy validated them
	delivered            []interceptors.Issue // the client's answer, re-validated here
	header               string               // X-Factgate-Issues
	notice               gjson.Result         // the trace's notice
	content              string
	revisionRatios       []float64 // each hidden request's bytes / the draft request's
	downgraded, resolved bool
	removed              []string // the claims the downgrade removed (paths in the returned attempt)
	attempts             []stochasticAttempt
	final                int             // the index of the returned attempt
	truth                map[string]bool // per claim of the returned attempt: its statement is true
}

// stochasticAttempt is one attempt of a request as the trace records it.
type stochasticAttempt struct {
	content  string
	issues   []interceptors.Issue
	excluded bool // dropped unflagged claims (the trace's error says so)
	leaked   bool
}

// TestStochasticAnalystThroughTheProxy runs a seeded stochastic analyst
// (mockupstream.Analyst: each claim wrong with a given probability in one of the
// ways analysts get replays wrong; each wrong claim a revision request names fixed
// with a given probability) through the proxy — strip_claims never, every other
// setting the default — and checks, with factgate's own validator on what the
// client received:
//
//   - no delivered answer has an issue above Info but semantic.* (the downgrade
//     runs on every answer, drafts accepted too under downgrade: below_threshold,
//     and removes the claims no edit makes honest), and the notice names any that
//     is left;
//   - the notice names every claim the downgrade removed (the text still states
//     it);
//   - no accepted draft keeps a confident claim with WeakEvidence;
//   - no downgrade introduces claim.no_alternatives;
//   - no regression: a delivered answer never has more Contradictions than its draft;
//   - X-Factgate-Issues delivered= counts the answer as delivered;
//   - the notice names every claim of the returned attempt with an issue above
//     Info, and never lists a true statement (the analyst knows which are) under
//     the heading "contradicts the facts";
//   - the attempt delivered is never worse, by revise.Rank (new Contradictions,
//     counted here from the attempts' claims, weighing revise.NewContradictionWeight),
//     than any attempt made, and the share of answers whose prose has a
//     Contradiction is not above the one the old rule (an attempt with a new
//     Contradiction may not win) gives on the same attempts.
//
// go test ./proxy -run StochasticAnalyst -v prints the before/after table of
// docs/revision.md ("Measured") and the revision request sizes. The answers are a
// function of the seed, so the figures are the same on every run.
func TestStochasticAnalystThroughTheProxy(t *testing.T) {
	t.Parallel()
	const seed, perConfig = 13, 40
	configs := []struct{ errorRate, fixRate, breakRate float64 }{
		{0, 0, 0}, // the model's true claims: nothing to flag
		{0.15, 0.8, 0}, {0.15, 0.5, 0}, {0.15, 0, 0},
		{0.35, 0.8, 0}, {0.35, 0.5, 0}, {0.35, 0, 0},
		// Revisions that also break claims the answer had right.
		{0.15, 0.8, 0.1}, {0.35, 0.8, 0.2}, {0.35, 0.5, 0.2}, {0.35, 0, 0.2},
	}
	type job struct{ config, n int }
	results := make([][]stochasticRun, len(configs))
	harnesses := make([]*harness, len(configs))
	analysts := make([]*mockupstream.Analyst, len(configs))
	for i, c := range configs {
		results[i] = make([]stochasticRun, perConfig)
		h := newHarness(t, "", noticeRouteConfig("never", ""))
		analyst := &mockupstream.Analyst{Seed: seed, ErrorRate: c.errorRate, FixRate: c.fixRate, BreakRate: c.breakRate}
		if err := h.mock.SetScript(&mockupstream.Script{Rules: []mockupstream.Rule{analyst.Rule()}}); err != nil {
			t.Fatal(err)
		}
		harnesses[i] = h
		analysts[i] = analyst
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, err := stochasticRequest(harnesses[j.config], analysts[j.config], j.n)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("config %d request %d: %v", j.config, j.n, err))
					mu.Unlock()
					continue
				}
				results[j.config][j.n] = r
			}
		}()
	}
	for i := range configs {
		for n := range perConfig {
			jobs <- job{i, n}
		}
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed: %s", len(failures), strings.Join(failures, "; "))
	}

	t.Logf("%d requests per row, seed %d (shares of the row's answers; counts in parentheses):", perConfig, seed)
	t.Logf("| error / fix / break rate | drafts with ≥1 C | returned attempt (the prose) with ≥1 C, old rule → order | answers where the order delivers another attempt than the old rule (their Cs in the prose, old rule → order) | delivered claims with ≥1 C | delivered with an issue above Info | answers with a claim removed | text states a C the reader is not told of, before → after | accepted drafts keeping a confident weak claim, before → after | `final=` matched the delivered answer | `delivered=` matched | no_alternatives introduced | regressions | delivered attempt worse than an attempt made | answers with a notice | notice entries whose statement is true under \"contradicts the facts\", old grouping → headings |")
	t.Logf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var allRatios []float64
	for i, c := range configs {
		var otherOldC, otherNewC int
		var draftC, returnedC, oldReturnedC, otherPick, deliveredC, deliveredIssue, removedIn, unflaggedAfter, accepted, acceptedWeak, acceptedWeakAfter, finalMatches, deliveredMatches, noticed, introduced, regressions, worse int
		var entries, trueContradictedOld, trueContradicted int
		for n, r := range results[i] {
			where := fmt.Sprintf("error rate %.2f, fix rate %.2f, break rate %.2f, case %d", c.errorRate, c.fixRate, c.breakRate, n)
			draftCount := interceptors.CountSeverities(r.draft)
			deliveredCount := interceptors.CountSeverities(r.delivered)
			if draftCount[interceptors.Contradiction] > 0 {
				draftC++
			}
			if interceptors.CountSeverities(r.returned)[interceptors.Contradiction] > 0 {
				returnedC++
			}
			if deliveredCount[interceptors.Contradiction] > 0 {
				deliveredC++
			}
			if deliveredCount.AtLeast(interceptors.WeakEvidence) > 0 {
				deliveredIssue++
			}
			// What the reader was told: the notice in the content (a notice the
			// trace records with mode none never reached the reader).
			named := map[string]bool{}
			if r.notice.Get("mode").Str == "append" {
				named = noticeNames(r.notice)
			}
			// Re-validating the delivered answer finds nothing above Info but what
			// no edit of the claims block can fix (semantic.*, about the prose); and
			// the notice names every issue above Info left in it.
			for _, is := range r.delivered {
				if is.Severity > interceptors.Info && !strings.HasPrefix(is.Code, "semantic.") {
					t.Errorf("%s: the delivered answer has %s %s at %s:\n%s", where, is.Severity, is.Code, is.Path, r.content)
				}
				if is.Severity > interceptors.Info && !named[is.Code+" "+claims.ClaimPath(is.Path)] {
					t.Errorf("%s: the delivered answer has %s %s at %s, and its notice does not name it:\n%s", where, is.Severity, is.Code, is.Path, r.content)
				}
			}
			if len(r.removed) > 0 {
				removedIn++
			}
			// A removed claim is still stated by the text the reader reads: the
			// notice names it.
			for _, p := range r.removed {
				found := false
				for k := range named {
					found = found || strings.HasSuffix(k, " "+p)
				}
				if !found {
					t.Errorf("%s: the downgrade removed %s, and the notice does not name it", where, p)
				}
			}
			if text := r.notice.Get("text").Str; len(named) > 0 {
				if !strings.Contains(r.content, text) {
					t.Errorf("%s: the notice is not in the content", where)
				}
				noticed++
			}
			// The text the reader sees still states what the returned attempt said:
			// a Contradiction in it is visible unless the notice names it; and every
			// claim of it with an issue above Info is named, whatever other claims
			// say (claims share evidence strings, codes and messages).
			for _, is := range r.returned {
				if is.Severity >= interceptors.Contradiction && !named[is.Code+" "+claims.ClaimPath(is.Path)] {
					unflaggedAfter++
					t.Errorf("%s: %s at %s reaches the reader unflagged", where, is.Code, is.Path)
					break
				}
			}
			for _, is := range r.returned {
				if p := claims.ClaimPath(is.Path); p != "" && is.Severity > interceptors.Info && !named[is.Code+" "+p] {
					t.Errorf("%s: the returned attempt's %s %s at %s is not named in the notice", where, is.Severity, is.Code, is.Path)
				}
			}
			// The notice's entries (one per claim) and the heading each stands
			// under: the most serious of its issues'. Before, a claim stood under
			// "与录像不符" when any of its issues was a Contradiction.
			if r.notice.Get("mode").Str == "append" {
				type entry struct{ heading, old string }
				byClaim := map[string]*entry{}
				r.notice.Get("issues").ForEach(func(_, is gjson.Result) bool {
					p := claims.ClaimPath(is.Get("path").Str)
					if p == "" {
						return true
					}
					e := byClaim[p]
					if e == nil {
						e = &entry{heading: "unverified"}
						byClaim[p] = e
					}
					if h := is.Get("heading").Str; headingRank(h) < headingRank(e.heading) {
						e.heading = h
					}
					if sev, err := interceptors.ParseSeverity(is.Get("severity").Str); err == nil && sev >= interceptors.Contradiction {
						e.old = "contradiction"
					}
					return true
				})
				for p, e := range byClaim {
					entries++
					if !r.truth[p] {
						continue
					}
					if e.old == "contradiction" {
						trueContradictedOld++
					}
					if e.heading == "contradiction" {
						trueContradicted++
						t.Errorf("%s: the notice tells the reader the true statement at %s contradicts the facts: %s", where, p, r.notice.Get("text").Str)
					}
				}
			}
			// The attempt delivered is the best by the order; the old rule's pick
			// on the same attempts, for the share of prose with a Contradiction.
			ranks, oldPick := attemptRanks(r.attempts)
			for k := range ranks {
				if ranks[r.final].Compare(ranks[k]) > 0 {
					worse++
					t.Errorf("%s: attempt %d (%v) was delivered, but attempt %d (%v) is better by the order", where, r.final, ranks[r.final], k, ranks[k])
				}
			}
			if interceptors.CountSeverities(r.attempts[oldPick].issues)[interceptors.Contradiction] > 0 {
				oldReturnedC++
			}
			if oldPick != r.final {
				otherPick++
				otherOldC += interceptors.CountSeverities(r.attempts[oldPick].issues)[interceptors.Contradiction]
				otherNewC += interceptors.CountSeverities(r.returned)[interceptors.Contradiction]
			}
			if r.outcome == "accepted" {
				accepted++
				if hasCode(r.draft, interceptors.WeakEvidence) {
					acceptedWeak++
				}
				if hasCode(r.delivered, interceptors.WeakEvidence) {
					acceptedWeakAfter++
					t.Errorf("%s: an accepted draft keeps a confident claim with WeakEvidence: %v", where, aboveInfo(r.delivered))
				}
			}
			had := map[string]bool{}
			for _, is := range r.returned {
				if is.Code == validate.CodeNoAlternatives {
					had[claims.ClaimPath(is.Path)] = true
				}
			}
			for _, is := range r.delivered {
				if is.Code == validate.CodeNoAlternatives && !had[claims.ClaimPath(is.Path)] {
					introduced++
					t.Errorf("%s: the downgrade introduced claim.no_alternatives at %s", where, is.Path)
				}
			}
			if deliveredCount[interceptors.Contradiction] > draftCount[interceptors.Contradiction] {
				regressions++
				t.Errorf("%s: regression: the delivered answer has %d Contradictions, its draft %d", where, deliveredCount[interceptors.Contradiction], draftCount[interceptors.Contradiction])
			}
			_, rest, _ := strings.Cut(r.header, ";final=")
			final, delivered, _ := strings.Cut(rest, ";delivered=")
			if final == deliveredCount.String() {
				finalMatches++
			}
			if delivered == deliveredCount.String() {
				deliveredMatches++
			} else {
				t.Errorf("%s: X-Factgate-Issues %q, but the answer as delivered has %s", where, r.header, deliveredCount)
			}
			if c.errorRate == 0 && (len(aboveInfo(r.draft)) > 0 || r.notice.Exists() || r.downgraded) {
				t.Errorf("%s: the model's true claims are flagged: %v", where, aboveInfo(r.draft))
			}
			allRatios = append(allRatios, r.revisionRatios...)
		}
		share := func(n, of int) string {
			if of == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f%% (%d)", 100*float64(n)/float64(of), n)
		}
		t.Logf("| %.2f / %.1f / %.1f | %s | %s → %s | %s (%d → %d) | %s | %s | %s | %s → %s | %s → %s of %d | %s | %s | %d | %d | %d | %s | %d → %d of %d |",
			c.errorRate, c.fixRate, c.breakRate, share(draftC, perConfig), share(oldReturnedC, perConfig), share(returnedC, perConfig), share(otherPick, perConfig), otherOldC, otherNewC, share(deliveredC, perConfig), share(deliveredIssue, perConfig), share(removedIn, perConfig),
			share(returnedC, perConfig), share(unflaggedAfter, perConfig),
			share(acceptedWeak, accepted), share(acceptedWeakAfter, accepted), accepted,
			share(finalMatches, perConfig), share(deliveredMatches, perConfig), introduced, regressions, worse, share(noticed, perConfig),
			trueContradictedOld, trueContradicted, entries)
		if returnedC > oldReturnedC {
			t.Errorf("error rate %.2f, fix rate %.2f, break rate %.2f: %d answers' prose has a Contradiction, %d with the old rule", c.errorRate, c.fixRate, c.breakRate, returnedC, oldReturnedC)
		}
	}
	if len(allRatios) == 0 {
		t.Fatal("no revision request was made")
	}
	sum, most := 0.0, 0.0
	for _, r := range allRatios {
		sum += r
		most = max(most, r)
	}
	t.Logf("revision requests: %d, mean %.3fx the draft request, max %.3fx", len(allRatios), sum/float64(len(allRatios)), most)
	if most > 1.3 {
		t.Errorf("a revision request is %.2fx its draft request, want at most 1.3x", most)
	}
}

// stochasticRequest sends case n to h and reads what the client and the trace got.
func stochasticRequest(h *harness, analyst *mockupstream.Analyst, n int) (stochasticRun, error) {
	var r stochasticRun
	body, _ := json.Marshal(map[string]any{
		"model": "ra3-analyst",
		"messages": []map[string]string{
			// The case line goes into the system message: every request sends the
			// same log (its fact index is built once).
			{"role": "system", "content": fmt.Sprintf("你是红警 3 录像分析助手。#case %d", n)},
			{"role": "user", "content": "分析这局录像。\n\n" + replayText},
		},
	})
	status, hdr, resp, err := h.tryPost("/v1/chat/completions", string(body))
	if err != nil {
		return r, err
	}
	if status != 200 {
		return r, fmt.Errorf("status %d: %s", status, resp)
	}
	r.content = gjson.GetBytes(resp, "choices.0.message.content").Str
	r.header = hdr.Get("X-Factgate-Issues")
	tresp, err := h.getTrace(hdr.Get("X-Factgate-Trace-Id"))
	if err != nil {
		return r, err
	}
	tb, err := io.ReadAll(tresp.Body)
	tresp.Body.Close()
	if err != nil || tresp.StatusCode != 200 {
		return r, fmt.Errorf("trace: %d %v %s", tresp.StatusCode, err, tb)
	}
	tr := gjson.ParseBytes(tb)
	r.outcome = tr.Get("final.outcome").Str
	r.notice = tr.Get("notice")
	r.downgraded = len(tr.Get("downgrades").Array()) > 0
	for _, d := range tr.Get("downgrades.#(removed==true)#").Array() {
		r.removed = append(r.removed, d.Get("path").Str)
	}
	attempts := tr.Get("attempts").Array()
	if len(attempts) == 0 {
		return r, fmt.Errorf("the trace has no attempt: %s", tr.Raw)
	}
	decode := func(a gjson.Result) []interceptors.Issue {
		var is []interceptors.Issue
		_ = json.Unmarshal([]byte(a.Get("issues").Raw), &is)
		return is
	}
	r.draft = decode(attempts[0])
	r.final = int(tr.Get("final.attempt").Int())
	r.returned = decode(attempts[r.final])
	for _, a := range attempts {
		r.attempts = append(r.attempts, stochasticAttempt{content: a.Get("content").Str, issues: decode(a),
			excluded: strings.HasPrefix(a.Get("error").Str, "not eligible"), leaked: a.Get("leaked").Bool()})
	}
	var ok bool
	if r.truth, ok = analyst.TrueStatements(replayText, r.attempts[r.final].content); !ok {
		return r, fmt.Errorf("the analyst cannot read its own answer:\n%s", r.attempts[r.final].content)
	}
	draftBytes := attempts[0].Get("request_bytes").Float()
	for _, a := range attempts[1:] {
		r.revisionRatios = append(r.revisionRatios, a.Get("request_bytes").Float()/draftBytes)
	}
	if r.delivered, err = checkOfflineErr(r.content); err != nil {
		return r, err
	}
	if v, err := url.PathUnescape(hdr.Get("X-Factgate-Notice")); err != nil || v != "" {
		return r, fmt.Errorf("X-Factgate-Notice %q under notice: append", v)
	}
	return r, nil
}

// noticeNames returns "code claimPath" for every issue a notice names.
func noticeNames(notice gjson.Result) map[string]bool {
	out := map[string]bool{}
	notice.Get("issues").ForEach(func(_, is gjson.Result) bool {
		out[is.Get("code").Str+" "+claims.ClaimPath(is.Get("path").Str)] = true
		return true
	})
	return out
}

// hasCode reports an issue of exactly that severity.
func hasCode(issues []interceptors.Issue, s interceptors.Severity) bool {
	for _, is := range issues {
		if is.Severity == s {
			return true
		}
	}
	return false
}

// headingRank orders the notice headings, most serious first.
func headingRank(h string) int {
	for i, name := range []string{"contradiction", "citation", "weak", "unverified"} {
		if h == name {
			return i
		}
	}
	return 3
}

// attemptRanks returns each attempt's revise.Rank — its new Contradictions
// counted here, independently of the proxy: Contradictions whose key (code,
// severity, the claim's identity — a unit claim's unitId and asset, another
// claim's text — and, for an evidence item, its text) the draft does not have —
// and the attempt the old rule picks: an attempt with a new Contradiction, or one
// that dropped unflagged claims, may not win; then not leaking; then the fewest
// issues by severity, most severe first; the earlier on a tie.
func attemptRanks(attempts []stochasticAttempt) ([]revise.Rank, int) {
	had := map[string]bool{}
	for _, k := range contradictionKeys(attempts[0]) {
		had[k] = true
	}
	ranks := make([]revise.Rank, len(attempts))
	news := make([]int, len(attempts))
	for i, a := range attempts {
		if i > 0 {
			for _, k := range contradictionKeys(a) {
				if !had[k] {
					news[i]++
				}
			}
		}
		ranks[i] = revise.AttemptRank(interceptors.CountSeverities(a.issues), news[i], a.excluded, a.leaked)
	}
	old := 0
	for i := 1; i < len(attempts); i++ {
		a, b := attempts[i], attempts[old]
		if a.excluded || news[i] > 0 || a.leaked && !b.leaked {
			continue
		}
		if !a.leaked && b.leaked || interceptors.CountSeverities(a.issues).Compare(interceptors.CountSeverities(b.issues)) < 0 {
			old = i
		}
	}
	return ranks, old
}

// contradictionKeys returns the keys of an attempt's Contradictions.
func contradictionKeys(a stochasticAttempt) []string {
	js, _ := claimsJSONOf(a.content)
	block := gjson.Parse(js)
	var keys []string
	for _, is := range a.issues {
		if is.Severity != interceptors.Contradiction {
			continue
		}
		key := is.Code + "|" + is.Severity.String() + "|"
		p := claims.ClaimPath(is.Path)
		if p == "" {
			keys = append(keys, key+is.Path)
			continue
		}
		c := block.Get(strings.NewReplacer("[", ".", "]", "").Replace(p))
		key += p[:strings.IndexByte(p, '[')] + " "
		if strings.HasPrefix(p, "unitClaims") {
			key += c.Get("unitId").Raw + " " + c.Get("claim").Str
		} else {
			key += c.Get("claim").Str
		}
		if p != is.Path {
			key += "|" + block.Get(strings.NewReplacer("[", ".", "]", "").Replace(is.Path)).Str
		}
		keys = append(keys, key)
	}
	return keys
}
