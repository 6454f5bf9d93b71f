package abtest

import (
	"math"
	"testing"
)

// near reports |got − want| ≤ tol.
func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestNormalCDF(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		x    float64
		want float64 // standard normal table
	}{
		{name: "the median", x: 0, want: 0.5},
		{name: "one sigma", x: 1, want: 0.8413447461},
		{name: "the 97.5% quantile", x: Z95, want: 0.975},
		{name: "three sigma below", x: -3, want: 0.0013498980},
		{name: "far in the lower tail stays positive", x: -10, want: 7.6198530242e-24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := NormalCDF(tc.x); !near(got, tc.want, 1e-9*max(tc.want, 1e-14)) && !near(got, tc.want, 1e-10) {
				t.Errorf("Φ(%v) = %.12g, want %.12g", tc.x, got, tc.want)
			}
		})
	}
}

// The Wilson bounds are those published by Newcombe (1998), "Two-sided confidence
// intervals for the single proportion: comparison of seven methods", Statistics in
// Medicine 17, Table I (method 3, the score interval), to four decimals; the
// other rows are the formula worked by hand:
//
//	38/118: p̂ = 0.322034, z²/n = 0.032555, centre = (0.322034 + 0.016277)/1.032555 = 0.327645,
//	        half = 1.898176·√(0.001850 + 0.0000690) = 0.083157 → [0.244488, 0.410801]
func TestWilson(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		x, n      int64
		low, high float64
		tol       float64
	}{
		{name: "Newcombe 81/263", x: 81, n: 263, low: 0.2553, high: 0.3662, tol: 5e-5},
		{name: "Newcombe 15/148", x: 15, n: 148, low: 0.0624, high: 0.1605, tol: 5e-5},
		{name: "Newcombe 0/20: the lower bound is exactly 0", x: 0, n: 20, low: 0, high: 0.1611, tol: 5e-5},
		{name: "Newcombe 1/29", x: 1, n: 29, low: 0.0061, high: 0.1718, tol: 5e-5},
		{name: "by hand 38/118", x: 38, n: 118, low: 0.244488, high: 0.410801, tol: 1e-6},
		{name: "10/10: the upper bound is exactly 1", x: 10, n: 10, low: 0.722467, high: 1, tol: 1e-6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			iv, ok := Wilson(tc.x, tc.n, Z95)
			if !ok {
				t.Fatal("no interval")
			}
			if !near(iv.Low, tc.low, tc.tol) || !near(iv.High, tc.high, tc.tol) {
				t.Errorf("Wilson(%d/%d) = [%.6f, %.6f], want [%.6f, %.6f]", tc.x, tc.n, iv.Low, iv.High, tc.low, tc.high)
			}
			if p := float64(tc.x) / float64(tc.n); iv.Low > p || iv.High < p {
				t.Errorf("the interval [%v, %v] does not hold the estimate %v", iv.Low, iv.High, p)
			}
		})
	}
	for _, bad := range [][2]int64{{0, 0}, {3, 2}, {-1, 5}} {
		if _, ok := Wilson(bad[0], bad[1], Z95); ok {
			t.Errorf("Wilson(%d/%d) gave an interval for impossible counts", bad[0], bad[1])
		}
	}
}

// The difference intervals are Newcombe's (1998), "Interval estimation for the
// difference between independent proportions: comparison of eleven methods",
// Statistics in Medicine 17, Table II (method 10, hybrid score). The z statistics
// are worked by hand with the pooled proportion, e.g. 56/70 vs 48/80:
//
//	p̄ = 104/150 = 0.693333, SE = √(0.693333·0.306667·(1/70 + 1/80)) = √0.00569523 = 0.0754668
//	z = (0.8 − 0.6)/0.0754668 = 2.650172, p = erfc(2.650172/√2) = 0.008045
//
//	120/400 vs 80/400: p̄ = 0.25, SE = √(0.25·0.75·(2/400)) = 0.0306186, z = 0.1/0.0306186 = 3.265986, p = 0.001091
func TestCompareProportions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		x1, n1, x2, n2 int64
		diff           float64
		low, high      float64
		ivTol          float64
		z, p           float64
		testable       bool
	}{
		{name: "Newcombe 56/70 vs 48/80", x1: 56, n1: 70, x2: 48, n2: 80, diff: 0.2, low: 0.0524, high: 0.3339, ivTol: 5e-5, z: 2.650172, p: 0.008045, testable: true},
		{name: "Newcombe 9/10 vs 3/10", x1: 9, n1: 10, x2: 3, n2: 10, diff: 0.6, low: 0.1705, high: 0.8090, ivTol: 5e-5, z: 2.738613, p: 0.006170, testable: true},
		{name: "Newcombe 5/56 vs 0/29: a zero rate keeps a real interval", x1: 5, n1: 56, x2: 0, n2: 29, diff: 5.0 / 56, low: -0.0381, high: 0.1926, ivTol: 5e-5, z: 1.658649, p: 0.097187, testable: true},
		{name: "by hand 120/400 vs 80/400", x1: 120, n1: 400, x2: 80, n2: 400, diff: 0.1, low: 0.040032, high: 0.159077, ivTol: 1e-6, z: 3.265986, p: 0.001091, testable: true},
		{name: "the sign follows the first group", x1: 80, n1: 400, x2: 120, n2: 400, diff: -0.1, low: -0.159077, high: -0.040032, ivTol: 1e-6, z: -3.265986, p: 0.001091, testable: true},
		// With no event the Wilson upper bound is z²/(n+z²): 3.841459/63.841459 = 0.060172 for
		// n = 60 and 3.841459/53.841459 = 0.071348 for n = 50; the interval is [−u₂, u₁].
		{name: "no event in either group: an interval, but no test", x1: 0, n1: 50, x2: 0, n2: 60, diff: 0, low: -0.060172, high: 0.071348, ivTol: 1e-6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := CompareProportions(tc.x1, tc.n1, tc.x2, tc.n2)
			if !ok {
				t.Fatal("no comparison")
			}
			if !near(got.Difference, tc.diff, 1e-12) {
				t.Errorf("difference %v, want %v", got.Difference, tc.diff)
			}
			if !near(got.Interval.Low, tc.low, tc.ivTol) || !near(got.Interval.High, tc.high, tc.ivTol) {
				t.Errorf("interval [%.6f, %.6f], want [%.6f, %.6f]", got.Interval.Low, got.Interval.High, tc.low, tc.high)
			}
			if got.Testable != tc.testable {
				t.Fatalf("testable %v, want %v", got.Testable, tc.testable)
			}
			if tc.testable && (!near(got.Z, tc.z, 1e-6) || !near(got.P, tc.p, 1e-6)) {
				t.Errorf("z = %.6f p = %.6f, want z = %.6f p = %.6f", got.Z, got.P, tc.z, tc.p)
			}
		})
	}
	if _, ok := CompareProportions(1, 0, 1, 10); ok {
		t.Error("an empty group was compared")
	}
}

func TestTwoSidedPIsSymmetric(t *testing.T) {
	t.Parallel()
	for _, z := range []float64{0, 0.5, 1.96, 3, 8} {
		if p, q := TwoSidedP(z), TwoSidedP(-z); p != q || !near(p, 2*(1-NormalCDF(math.Abs(z))), 1e-12) {
			t.Errorf("z = %v: p(z) = %v, p(−z) = %v, 2(1−Φ|z|) = %v", z, p, q, 2*(1-NormalCDF(math.Abs(z))))
		}
	}
	if p := TwoSidedP(Z95); !near(p, 0.05, 1e-12) {
		t.Errorf("p at the 95%% quantile = %v, want 0.05", p)
	}
}
