package claims

import (
	"strings"
	"testing"
	"time"
)

func TestParseEvidence(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	tests := []struct {
		name   string
		raw    string
		typ    string // "" means unstructured
		time   time.Duration
		params []string
		reason string // substring of the error when unstructured
	}{
		{"build", "build|0:02.10|AlliedPowerPlant|246", "build", 2100 * time.Millisecond, []string{"AlliedPowerPlant", "246"}, ""},
		{"place", "place|0:07.80|AlliedPowerPlant|246|1204.5,880.0,12.0", "place", 7800 * time.Millisecond, []string{"AlliedPowerPlant", "246", "1204.5,880.0,12.0"}, ""},
		{"produce", "produce|9:10.00|AlliedBomberAircraft|655", "produce", 9*time.Minute + 10*time.Second, []string{"AlliedBomberAircraft", "655"}, ""},
		{"sell", "sell|3:10.00|512", "sell", 190 * time.Second, []string{"512"}, ""},
		{"select", "select|1:30.10|587", "select", 90100 * time.Millisecond, []string{"587"}, ""},
		{"move", "move|1:31.00|2200.0,1500.0,0.0", "move", 91 * time.Second, []string{"2200.0,1500.0,0.0"}, ""},
		{"power", "power|1:24.00|SpecialPower_PackReplaceSelf|246", "power", 84 * time.Second, []string{"SpecialPower_PackReplaceSelf", "246"}, ""},
		{"type in any case", "POWER|1:24|SpecialPower_PackReplaceSelf|246", "power", 84 * time.Second, []string{"SpecialPower_PackReplaceSelf", "246"}, ""},
		{"blanks trimmed", "  Select | 01:24.0 |  587  ", "select", 84 * time.Second, []string{"587"}, ""},
		{"time without fraction", "sell|1:24|512", "sell", 84 * time.Second, []string{"512"}, ""},
		{"time with milliseconds", "sell|1:24.000|512", "sell", 84 * time.Second, []string{"512"}, ""},
		{"minutes above 59", "sell|75:00.5|512", "sell", 75*time.Minute + 500*time.Millisecond, []string{"512"}, ""},
		{"hours", "sell|1:02:03.5|512", "sell", time.Hour + 2*time.Minute + 3500*time.Millisecond, []string{"512"}, ""},
		{"build missing a parameter", "build|0:02.10|AlliedPowerPlant", "", 0, nil, "build evidence takes a time and 2 parameter(s), got 2 field(s)"},
		{"place missing a parameter", "place|0:07.80|AlliedPowerPlant|246", "", 0, nil, "place evidence takes a time and 3"},
		{"produce extra parameter", "produce|9:10|A|655|x", "", 0, nil, "produce evidence takes a time and 2"},
		{"sell extra parameter", "sell|3:10|512|512", "", 0, nil, "sell evidence takes a time and 1"},
		{"select without unit", "select|1:30.10", "", 0, nil, "select evidence takes a time and 1"},
		{"move extra parameter", "move|1:31|2200.0,1500.0,0.0|246", "", 0, nil, "move evidence takes a time and 1"},
		{"power missing unit", "power|1:24|SpecialPower_PackReplaceSelf", "", 0, nil, "power evidence takes a time and 2"},
		{"unknown type", "attack|1:24|246", "", 0, nil, `unknown evidence type "attack"`},
		{"bad time", "sell|1:60|512", "", 0, nil, `time "1:60" is not a game-clock time`},
		{"time with letters", "sell|1m24s|512", "", 0, nil, "is not a game-clock time"},
		{"empty parameter", "power|1:24| |246", "", 0, nil, "power evidence parameter 1 is empty"},
		{"free text", "1:23 选择了 904", "", 0, nil, "not in"},
		{"seed's old form", "8:30 使用 SpecialPower_UnpackReplaceSelf", "", 0, nil, "not in"},
		{"empty", "", "", 0, nil, "not in"},
		{"only bars", "|||", "", 0, nil, `unknown evidence type ""`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := p.ParseEvidence(tc.raw)
			if ev.Raw != tc.raw {
				t.Errorf("Raw = %q, want %q", ev.Raw, tc.raw)
			}
			if tc.typ == "" {
				if err == nil || ev.Structured || ev.Type != "" || ev.Params != nil {
					t.Fatalf("ParseEvidence(%q) = %+v, %v; want unstructured", tc.raw, ev, err)
				}
				if !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("error %q does not say %q", err, tc.reason)
				}
				return
			}
			if err != nil || !ev.Structured {
				t.Fatalf("ParseEvidence(%q): %v", tc.raw, err)
			}
			if ev.Type != tc.typ || ev.Time != tc.time || strings.Join(ev.Params, "\x00") != strings.Join(tc.params, "\x00") {
				t.Fatalf("ParseEvidence(%q) = %s %v %q; want %s %v %q", tc.raw, ev.Type, ev.Time, ev.Params, tc.typ, tc.time, tc.params)
			}
		})
	}
}

// TestEvidenceParamsDoNotAlias checks that the shared parameter arena never lets one
// item's parameters overwrite another's.
func TestEvidenceParamsDoNotAlias(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	var items []string
	for i := range 40 {
		items = append(items, `"power|1:`+pad2(i)+`|SpecialPower_X|`+pad2(i)+`"`, `"power|1:00| |1"`)
	}
	c := p.Parse(fenced("", `{"eventClaims": [{"claim": "e", "evidenceLevel": "possible", "evidence": [`+strings.Join(items, ",")+`]}]}`), Required)
	evs := c.EventClaims[0].Evidence
	if len(evs) != 80 {
		t.Fatalf("%d evidence items, want 80", len(evs))
	}
	for i := range 40 {
		ev := evs[2*i]
		if !ev.Structured || ev.Params[1] != pad2(i) || cap(ev.Params) != 2 {
			t.Fatalf("item %d params = %q (cap %d)", 2*i, ev.Params, cap(ev.Params))
		}
	}
}

func pad2(i int) string { return string([]byte{byte('0' + i/10), byte('0' + i%10)}) }
