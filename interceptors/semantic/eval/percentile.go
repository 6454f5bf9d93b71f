package eval

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds by the nearest-rank
// method: the smallest value with at least p% of the values at or below it. It
// returns 0 for no values and leaves ds unchanged. factgate eval's latency figures
// use it, and so do factgate bench's (cmd/factgate/internal/loadbench) and the
// scale-out benchmark's, so that every latency figure the project reports is
// computed the same way.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
