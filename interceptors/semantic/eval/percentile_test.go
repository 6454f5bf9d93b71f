package eval

import (
	"slices"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	ds := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	cases := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ds(7), 95, 7 * time.Millisecond},
		{"median of an odd count, unsorted", ds(30, 10, 20), 50, 20 * time.Millisecond},
		{"median of an even count", ds(10, 20, 30, 40), 50, 20 * time.Millisecond},
		{"p95 of twenty", ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 100), 95, 19 * time.Millisecond},
		{"p95 of ten is the largest", ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 100), 95, 100 * time.Millisecond},
		{"p99 of a hundred", ds(append(make([]int, 98), 5, 9)...), 99, 5 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(tc.in)
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Fatalf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Fatal("Percentile reordered its input")
			}
		})
	}
}
