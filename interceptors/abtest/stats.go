package abtest

import "math"

// The statistics of the experiment report: Wilson score intervals for each rate,
// Newcombe's hybrid score interval for a difference of two rates, and the pooled
// two-proportion z-test. Large-sample normal approximations, as A/B reports use
// them; the Wilson interval stays sensible for small counts and rates near 0 or 1,
// where the textbook Wald interval collapses.

// Z95 is the two-sided 95% quantile of the standard normal distribution,
// Φ⁻¹(0.975): every interval of the report is a 95% interval.
const Z95 = 1.959963984540054

// Interval is a two-sided confidence interval [Low, High].
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// NormalCDF returns Φ(x), the standard normal distribution function.
func NormalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// TwoSidedP returns the two-sided p-value of a standard normal statistic z:
// P(|Z| ≥ |z|) = 2·(1 − Φ(|z|)), computed with erfc so that it stays exact far in
// the tail.
func TwoSidedP(z float64) float64 { return math.Erfc(math.Abs(z) / math.Sqrt2) }

// Wilson returns the Wilson score interval of the proportion successes/n at the
// normal quantile z (Z95 for 95%):
//
//	centre = (p̂ + z²/2n) / (1 + z²/n)
//	half   = z/(1 + z²/n) · √(p̂(1−p̂)/n + z²/4n²)
//
// ok is false when n is 0 (there is no information) or the counts are impossible
// (successes < 0 or > n). The bounds are exactly 0 when successes is 0 and exactly
// 1 when successes is n.
func Wilson(successes, n int64, z float64) (iv Interval, ok bool) {
	if n <= 0 || successes < 0 || successes > n {
		return Interval{}, false
	}
	nf := float64(n)
	p := float64(successes) / nf
	z2 := z * z
	denom := 1 + z2/nf
	centre := (p + z2/(2*nf)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	iv = Interval{Low: max(0, centre-half), High: min(1, centre+half)}
	if successes == 0 {
		iv.Low = 0
	}
	if successes == n {
		iv.High = 1
	}
	return iv, true
}

// ProportionTest is the comparison of two proportions p₁ = x₁/n₁ and p₂ = x₂/n₂.
type ProportionTest struct {
	// Difference is p₁ − p₂.
	Difference float64
	// Interval is Newcombe's hybrid score interval of the difference (see
	// DifferenceInterval).
	Interval Interval
	// Z is the pooled two-proportion z statistic; Testable is false (and Z and P
	// are zero) when it is undefined — no successes or no failures in either
	// group, so the pooled variance is 0.
	Z        float64
	P        float64
	Testable bool
}

// CompareProportions compares x1/n1 with x2/n2: the difference, its 95% interval
// and the pooled two-proportion z-test (two-sided). ok is false when either group
// is empty or has impossible counts.
//
//	p̄ = (x₁+x₂)/(n₁+n₂)
//	z = (p₁ − p₂) / √(p̄(1−p̄)(1/n₁ + 1/n₂))
func CompareProportions(x1, n1, x2, n2 int64) (t ProportionTest, ok bool) {
	iv, ok := DifferenceInterval(x1, n1, x2, n2, Z95)
	if !ok {
		return ProportionTest{}, false
	}
	p1, p2 := float64(x1)/float64(n1), float64(x2)/float64(n2)
	t = ProportionTest{Difference: p1 - p2, Interval: iv}
	pooled := float64(x1+x2) / float64(n1+n2)
	se := math.Sqrt(pooled * (1 - pooled) * (1/float64(n1) + 1/float64(n2)))
	if se > 0 {
		t.Z = (p1 - p2) / se
		t.P = TwoSidedP(t.Z)
		t.Testable = true
	}
	return t, true
}

// DifferenceInterval returns Newcombe's hybrid score interval (1998, method 10)
// of p₁ − p₂ at the normal quantile z, built from the two Wilson intervals
// [l₁,u₁] and [l₂,u₂]:
//
//	low  = (p₁−p₂) − √((p₁−l₁)² + (u₂−p₂)²)
//	high = (p₁−p₂) + √((u₁−p₁)² + (p₂−l₂)²)
//
// Unlike the Wald interval it never leaves [−1, 1] and does not collapse to a
// point when a rate is 0. ok is false when either group is empty.
func DifferenceInterval(x1, n1, x2, n2 int64, z float64) (Interval, bool) {
	w1, ok1 := Wilson(x1, n1, z)
	w2, ok2 := Wilson(x2, n2, z)
	if !ok1 || !ok2 {
		return Interval{}, false
	}
	p1, p2 := float64(x1)/float64(n1), float64(x2)/float64(n2)
	d := p1 - p2
	return Interval{
		Low:  d - math.Sqrt(sq(p1-w1.Low)+sq(w2.High-p2)),
		High: d + math.Sqrt(sq(w1.High-p1)+sq(p2-w2.Low)),
	}, true
}

func sq(x float64) float64 { return x * x }
