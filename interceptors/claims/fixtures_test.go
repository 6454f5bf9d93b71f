package claims

import (
	"sort"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// ownCodes are the issue codes this package reports; the fixtures' other codes
// belong to the validators.
var ownCodes = map[string]bool{
	CodeMissing: true, CodeJSONInvalid: true, CodeRootNotObject: true, CodeTruncated: true,
	CodeFieldAlias: true, CodeUnknownLevel: true, CodeEvidenceUnstructured: true,
	CodeUnitMissingID: true, CodeUnitMissingClaim: true,
}

// TestFixtureCases parses every fixture answer of a route that requires claims: the
// parser must report exactly the fixture's format issues (c08, c09) and nothing for
// the other answers, which are well-formed.
func TestFixtureCases(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	for _, fc := range loadCases(t) {
		t.Run(fc.ID, func(t *testing.T) {
			t.Parallel()
			var want []string
			for _, e := range fc.Expect {
				if ownCodes[e.Code] {
					want = append(want, e.Code+"|"+e.Severity+"|"+e.Path)
				}
			}
			c := p.Parse(fc.Answer, Required)
			got := issueKeys(c.Issues)
			sort.Strings(want)
			if joinKeys(got) != joinKeys(want) {
				t.Fatalf("issues:\n%s\nwant:\n%s", joinKeys(got), joinKeys(want))
			}
			if fc.ID == "c09_missing_block" {
				if c.Found || c.Marker {
					t.Fatalf("c09 has no block and no marker; got Found=%v Marker=%v", c.Found, c.Marker)
				}
				return
			}
			if !c.Usable() || !c.Marker || !c.Fenced {
				t.Fatalf("want a usable fenced block after the marker; got Found=%v Valid=%v Marker=%v Fenced=%v", c.Found, c.Valid, c.Marker, c.Fenced)
			}
			if n := len(c.UnitClaims) + len(c.EventClaims) + len(c.TimelineClaims); n == 0 {
				t.Fatalf("no claims parsed from %s", fc.ID)
			}
		})
	}
}

// TestTolerantFormatCase checks what a validator relies on in c08 beyond its issues.
func TestTolerantFormatCase(t *testing.T) {
	t.Parallel()
	p := newRA3Parser(t)
	c := p.Parse(loadCase(t, "c08_tolerant_format").Answer, Required)
	if len(c.UnitClaims) != 10 {
		t.Fatalf("got %d unit claims, want the first 10 of 12", len(c.UnitClaims))
	}
	first := c.UnitClaims[0]
	if !first.HasUnitID || first.UnitID != 900 || first.UnitIDRaw != "900" {
		t.Errorf("unitId \"900\" read as %d (has=%v raw=%q), want 900", first.UnitID, first.HasUnitID, first.UnitIDRaw)
	}
	if last := c.UnitClaims[9]; last.UnitID != 909 || last.Path != "unitClaims[9]" {
		t.Errorf("last kept claim is %d at %s, want 909 at unitClaims[9]", last.UnitID, last.Path)
	}
	if u := c.UnitClaims[3]; u.LevelKnown || u.Level != Uncertain || u.LevelRaw != "likely" {
		t.Errorf("unitClaims[3] level = %v known=%v raw=%q, want uncertain, unknown, \"likely\"", u.Level, u.LevelKnown, u.LevelRaw)
	}
	if ev := c.UnitClaims[4].Evidence[0]; ev.Structured || ev.Raw != "1:23 选择了 904" || ev.Path != "unitClaims[4].evidence[0]" {
		t.Errorf("free-text evidence = %+v, want unstructured \"1:23 选择了 904\"", ev)
	}
	if ev := c.UnitClaims[5].Evidence[0]; !ev.Structured || ev.Type != "select" || ev.Params[0] != "905" {
		t.Errorf("select evidence = %+v, want structured select of 905", ev)
	}
	if len(c.EventClaims) != 1 || c.EventClaims[0].Claim != "PlayerA 主基地打包" || !c.EventClaims[0].Aliased {
		t.Fatalf("event claims = %+v, want one aliased claim \"PlayerA 主基地打包\"", c.EventClaims)
	}
	if ev := c.EventClaims[0].Evidence[0]; ev.Type != "power" || ev.Params[0] != "SpecialPower_PackReplaceSelf" || ev.Params[1] != "246" {
		t.Errorf("event evidence = %+v", ev)
	}
	for _, is := range c.Issues {
		if is.Severity != interceptors.Info {
			t.Errorf("c08 issue %s is %v, want Info", is.Code, is.Severity)
		}
	}
	want := map[string]map[string]string{
		CodeTruncated:            {"list": "unitClaims", "count": "12", "cap": "10"},
		CodeUnknownLevel:         {"level": "likely"},
		CodeEvidenceUnstructured: {"evidence": "1:23 选择了 904"},
		CodeFieldAlias:           {"alias": "event", "field": "claim"},
	}
	for _, is := range c.Issues {
		for k, v := range want[is.Code] {
			if is.Args[k] != v {
				t.Errorf("%s Args[%q] = %q, want %q", is.Code, k, is.Args[k], v)
			}
		}
		if is.Message == "" || is.Validator != ValidatorName {
			t.Errorf("%s: message %q validator %q", is.Code, is.Message, is.Validator)
		}
	}
}
