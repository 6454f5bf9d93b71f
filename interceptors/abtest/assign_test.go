package abtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// subjectIDs returns n subject ids drawn from a fixed seed, as an app's user ids.
func subjectIDs(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user-%016x", r.Uint64())
	}
	return out
}

func TestTheSameSubjectAlwaysGetsTheSameVariant(t *testing.T) {
	t.Parallel()
	cfg := `
name: sticky
control: a
variants:
  - {name: a, weight: 1}
  - {name: b, weight: 1}
  - {name: c, weight: 1}
`
	e := newExperiment(t, cfg)
	// Another replica (or the same one after a restart) with the variants listed in
	// another order.
	replica := newExperiment(t, `
name: sticky
control: a
variants:
  - {name: c, weight: 1}
  - {name: a, weight: 1}
  - {name: b, weight: 1}
`)
	requests := []struct {
		name      string
		body      string
		h         headers
		clientKey string
	}{
		{name: "X-Factgate-Subject", body: `{"model":"m","messages":[]}`, h: headers{"X-Factgate-Subject": "team-7"}},
		{name: "the body's user", body: `{"model":"m","user":"alice@example.com","messages":[]}`},
		{name: "X-Factgate-Session", body: `{"model":"m","messages":[]}`, h: headers{"X-Factgate-Session": "replay-42"}},
		{name: "metadata factgate.session", body: `{"model":"m","metadata":{"factgate.session":"replay-43"},"messages":[]}`},
		{name: "the client key", body: `{"model":"m","messages":[]}`, clientKey: "replay-reader"},
	}
	first := make([]string, len(requests))
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		k := i % len(requests)
		rq := requests[k]
		ex := exchange(rq.body, rq.h, rq.clientKey)
		got := assign(t, e, ex)
		if i < len(requests) {
			first[k] = got
			seen[got] = true
			if other := assign(t, replica, exchange(rq.body, rq.h, rq.clientKey)); other != got {
				t.Errorf("%s: variant %s here, %s on a replica with the variants reordered", rq.name, got, other)
			}
			continue
		}
		if got != first[k] {
			t.Fatalf("request %d by %s got variant %s, earlier ones got %s", i, rq.name, got, first[k])
		}
	}
	if len(seen) < 2 {
		t.Errorf("five subjects all got variant %v: the subject does not reach the hash", first)
	}
}

func TestSharesFollowTheWeights(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: shares
control: baseline
variants:
  - {name: baseline, weight: 70}
  - {name: strict, weight: 20}
  - {name: terse, weight: 10}
`)
	const n = 100000
	counts := map[string]int{}
	for _, id := range subjectIDs(n, 1) {
		counts[e.pickBySubject(id).name]++
	}
	// The standard error of a share p is √(p(1−p)/n) ≤ 0.0016 here; 0.008 is five of them.
	for name, want := range map[string]float64{"baseline": 0.7, "strict": 0.2, "terse": 0.1} {
		if got := float64(counts[name]) / n; math.Abs(got-want) > 0.008 {
			t.Errorf("variant %s got %.4f of %d subjects, want %.2f ± 0.008", name, got, n, want)
		}
	}
}

func TestRequestsWithoutSubjectAreDrawnByWeight(t *testing.T) {
	t.Parallel()
	e := newExperiment(t, `
name: random
control: a
variants:
  - {name: a, weight: 3}
  - {name: b, weight: 1}
`)
	e.random = rand.New(rand.NewPCG(7, 7)).Float64
	const n = 40000
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		ex := exchange(`{"model":"m","messages":[]}`, nil, "")
		counts[assign(t, e, ex)]++
		if i == 0 && !strings.Contains(notes(ex), "at random by weight") {
			t.Errorf("the trace does not say the variant was drawn at random: %q", notes(ex))
		}
	}
	if got := float64(counts["a"]) / n; math.Abs(got-0.75) > 0.011 {
		t.Errorf("variant a got %.4f of requests without a subject, want 0.75 ± 0.011", got)
	}
}

// cumulativePick is the scheme the experiment does not use — one hash point on the
// cumulative weights in config order — kept here to measure what it would move.
func cumulativePick(salt, subject string, names []string, weights []float64) string {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	u := unitHash(salt, subject, "") * total
	for i, w := range weights {
		if u < w {
			return names[i]
		}
		u -= w
	}
	return names[len(names)-1]
}

// experimentWith builds a weighted experiment named "moves" from name=weight pairs.
func experimentWith(t *testing.T, names []string, weights []float64) *Experiment {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: moves\ncontrol: " + names[0] + "\nvariants:\n")
	for i, n := range names {
		fmt.Fprintf(&b, "  - {name: %s, weight: %g}\n", n, weights[i])
	}
	return newExperiment(t, b.String())
}

// TestAWeightChangeMovesFewSubjects measures the subjects that change variant when
// the weights change, against the least any assignment that follows the weights
// must move (the total variation distance ½Σ|pᵢ − p′ᵢ| between the old and new
// shares), and against the cumulative-ranges scheme.
func TestAWeightChangeMovesFewSubjects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		before, after      []string
		wBefore, wAfter    []float64
		minimum            float64
		onlyInto, onlyFrom string // subjects may only move into / out of this variant
	}{
		{name: "50/50 to 60/40", before: []string{"a", "b"}, after: []string{"a", "b"}, wBefore: []float64{50, 50}, wAfter: []float64{60, 40}, minimum: 0.10},
		{name: "one of three doubles", before: []string{"a", "b", "c"}, after: []string{"a", "b", "c"}, wBefore: []float64{1, 1, 1}, wAfter: []float64{2, 1, 1}, minimum: 1.0 / 6, onlyInto: "a"},
		{name: "the last of three is halved", before: []string{"a", "b", "c"}, after: []string{"a", "b", "c"}, wBefore: []float64{1, 1, 2}, wAfter: []float64{1, 1, 1}, minimum: 1.0 / 6, onlyFrom: "c"},
		{name: "a third variant is added", before: []string{"a", "b"}, after: []string{"a", "b", "c"}, wBefore: []float64{1, 1}, wAfter: []float64{1, 1, 1}, minimum: 1.0 / 3, onlyInto: "c"},
		{name: "a variant is removed", before: []string{"a", "b", "c"}, after: []string{"a", "c"}, wBefore: []float64{1, 1, 1}, wAfter: []float64{1, 1}, minimum: 1.0 / 3, onlyFrom: "b"},
	}
	subjects := subjectIDs(40000, 2)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old := experimentWith(t, tc.before, tc.wBefore)
			updated := experimentWith(t, tc.after, tc.wAfter)
			moved, movedCumulative := 0, 0
			for _, s := range subjects {
				from, to := old.pickBySubject(s).name, updated.pickBySubject(s).name
				if from != to {
					moved++
					if (tc.onlyInto != "" && to != tc.onlyInto) || (tc.onlyFrom != "" && from != tc.onlyFrom) {
						t.Fatalf("subject %s moved from %s to %s; only moves into %q / out of %q are needed", s, from, to, tc.onlyInto, tc.onlyFrom)
					}
				}
				if cumulativePick(old.salt, s, tc.before, tc.wBefore) != cumulativePick(updated.salt, s, tc.after, tc.wAfter) {
					movedCumulative++
				}
			}
			frac := float64(moved) / float64(len(subjects))
			fracCumulative := float64(movedCumulative) / float64(len(subjects))
			t.Logf("moved %.4f of subjects (minimum %.4f; cumulative ranges would move %.4f)", frac, tc.minimum, fracCumulative)
			// The standard error of a moved fraction is at most 0.0025 here.
			if math.Abs(frac-tc.minimum) > 0.0125 {
				t.Errorf("moved %.4f of the subjects, want the minimum %.4f ± 0.0125", frac, tc.minimum)
			}
			if frac > fracCumulative+0.0125 {
				t.Errorf("moved %.4f, more than the cumulative scheme's %.4f", frac, fracCumulative)
			}
		})
	}
}

func TestTheSubjectComesFromTheFirstSourceThatNamesOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		body      string
		h         headers
		clientKey string
		subject   string
		src       SubjectSource
		none      bool
	}{
		{name: "the subject header beats everything", body: `{"user":"u1","metadata":{"factgate.session":"s1"}}`, h: headers{"x-factgate-subject": "team%20blue", "X-Factgate-Session": "s2"}, clientKey: "k", subject: "team blue", src: SubjectHeader},
		{name: "the body's user beats the session", body: `{"user":"u1","metadata":{"factgate.session":"s1"}}`, h: headers{"X-Factgate-Session": "s2"}, clientKey: "k", subject: "u1", src: SubjectUser},
		{name: "a blank user is no subject", body: `{"user":"  ","metadata":{"factgate.session":"s1"}}`, clientKey: "k", subject: "s1", src: SubjectMetadata},
		{name: "a user that is not a string is no subject", body: `{"user":42}`, clientKey: "k", subject: "k", src: SubjectClientKey},
		{name: "the session header beats metadata", body: `{"metadata":{"factgate.session":"s1"}}`, h: headers{"X-Factgate-Session": "s2"}, subject: "s2", src: SubjectSession},
		{name: "a percent-encoded session is the same subject as in metadata", body: `{}`, h: headers{"X-Factgate-Session": "%E5%BD%95%E5%83%8F-1"}, subject: "录像-1", src: SubjectSession},
		{name: "the metadata key in any case, the last one wins", body: `{"metadata":{"factgate.session":"s1","Factgate.Session":"s3"}}`, subject: "s3", src: SubjectMetadata},
		{name: "the client key last", body: `{"metadata":{"app":"x"}}`, clientKey: "replay-reader", subject: "replay-reader", src: SubjectClientKey},
		{name: "nothing names a subject", body: `{"metadata":{"factgate.session":""}}`, none: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			subject, src, ok := subjectOf(exchange(tc.body, tc.h, tc.clientKey))
			if ok == tc.none || subject != tc.subject || src != tc.src {
				t.Fatalf("subject %q from %q (found %v), want %q from %q", subject, src, ok, tc.subject, tc.src)
			}
		})
	}
}

func TestUnitHashIsUniformAndStable(t *testing.T) {
	t.Parallel()
	// A fixed value: the hash must not change between releases, or every subject
	// would move.
	if got := unitHash("salt", "alice", "strict"); math.Abs(got-unitHashAliceStrict) > 1e-15 {
		t.Fatalf("unitHash(salt, alice, strict) = %.17g, want %.17g: the assignment of every subject changed", got, unitHashAliceStrict)
	}
	// Ten equal bins over 50,000 subjects: each within five standard errors (√(0.1·0.9/50000) = 0.00134).
	var bins [10]int
	for _, s := range subjectIDs(50000, 3) {
		u := unitHash("salt", s, "v")
		if u <= 0 || u >= 1 {
			t.Fatalf("unitHash = %v, outside (0, 1)", u)
		}
		bins[int(u*10)]++
	}
	for i, c := range bins {
		if f := float64(c) / 50000; math.Abs(f-0.1) > 0.0067 {
			t.Errorf("bin %d holds %.4f of the values, want 0.1 ± 0.0067", i, f)
		}
	}
	if unitHash("ab", "c", "v") == unitHash("a", "bc", "v") {
		t.Error("salt and subject run together: (ab, c) and (a, bc) hash alike")
	}
}

// unitHashAliceStrict pins the hash, computed outside Go: SHA-256 of
// "salt\x00alice\x00strict\x00" starts ac16204ab7bb6707; its top 53 bits plus ½,
// over 2⁵³, are 0.6722126181045787 (python3: hashlib.sha256, struct.unpack(">Q")).
const unitHashAliceStrict = 0.6722126181045787
