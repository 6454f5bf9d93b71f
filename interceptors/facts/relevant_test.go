package facts

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

func TestRelevant(t *testing.T) {
	t.Parallel()
	whole := extractReplay(t, "allied_vs_soviet.txt")
	var synthetic strings.Builder
	for i := range 10 {
		fmt.Fprintf(&synthetic, "0:%02d.00 A 选择 [UnitId]5 [UnitId]6\n", 10+i*4)
		if i == 4 {
			synthetic.WriteString("0:27.00 A 使用 SpecialPower_X [UnitId]5\n")
		}
	}
	selections := extract(t, synthetic.String())

	tests := []struct {
		name      string
		ix        *Index
		units     []int64
		assets    []string
		powers    []string
		max       int
		want      []string // times of the lines, in order
		omitted   int
		mustMatch string // every line contains it ("" = no check)
	}{
		{"all of 246", whole, []int64{246}, nil, nil, 0, []string{"0:02.10", "0:09.50", "0:10.20", "0:24.00", "0:25.00", "0:31.40", "0:55.00", "1:10.00", "1:24.00"}, 0, "[UnitId]246"},
		{"negative max is no bound", whole, []int64{246}, nil, nil, -1, []string{"0:02.10", "0:09.50", "0:10.20", "0:24.00", "0:25.00", "0:31.40", "0:55.00", "1:10.00", "1:24.00"}, 0, "[UnitId]246"},
		{"an asset", whole, nil, []string{"AlliedBomberAircraft"}, nil, 0, []string{"9:10.00", "10:10.00"}, 0, "AlliedBomberAircraft"},
		{"a power, both players", whole, nil, nil, []string{"SpecialPower_UnpackReplaceSelf"}, 0, []string{"1:41.00", "4:40.00", "7:32.00"}, 0, "SpecialPower_UnpackReplaceSelf"},
		{"units and powers, no duplicates", whole, []int64{587, 690}, nil, []string{"SpecialPower_UnpackReplaceSelf"}, 0, []string{"1:30.10", "1:41.00", "4:40.00", "7:18.00", "7:32.00"}, 0, ""},
		{"bounded: first, last, then identifying ops spread", whole, []int64{320}, nil, nil, 5, []string{"1:15.00", "1:53.00", "6:10.24", "11:56.45", "12:05.00"}, 14, "[UnitId]320"},
		{"bounded: powers kept over selections", selections, []int64{5}, nil, nil, 3, []string{"0:10.00", "0:27.00", "0:46.00"}, 8, "[UnitId]5"},
		{"bounded below the first level", whole, []int64{246, 587, 690}, nil, nil, 2, []string{"0:02.10", "7:32.00"}, 11, ""},
		{"unknown unit", whole, []int64{424242}, []string{"NoSuchAsset"}, []string{"NoSuchPower"}, 10, nil, 0, ""},
		{"nothing asked", whole, nil, nil, nil, 10, nil, 0, ""},
		{"nil index", nil, []int64{246}, nil, nil, 10, nil, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lines, omitted := tc.ix.Relevant(tc.units, tc.assets, tc.powers, tc.max)
			var got []string
			for _, l := range lines {
				got = append(got, interceptors.FormatClock(l.At))
				if tc.mustMatch != "" && !strings.Contains(l.Text, tc.mustMatch) {
					t.Errorf("line %q does not name %s", l.Text, tc.mustMatch)
				}
				if !strings.HasPrefix(l.Text, interceptors.FormatClock(l.At)+" ") {
					t.Errorf("line %q has time %v", l.Text, l.At)
				}
			}
			if !slices.Equal(got, tc.want) || omitted != tc.omitted {
				t.Errorf("Relevant = %q, omitted %d; want %q, omitted %d", got, omitted, tc.want, tc.omitted)
			}
			if tc.max > 0 && len(lines) > tc.max {
				t.Errorf("%d lines over the bound %d", len(lines), tc.max)
			}
		})
	}
}
