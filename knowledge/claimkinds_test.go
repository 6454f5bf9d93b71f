package knowledge

import (
	"strings"
	"testing"
	"testing/fstest"
)

// kindsPack is minimalPack with a claims.kinds declaration instead of caps.
func kindsPack(kinds, contract string) fstest.MapFS {
	fsys := minimalPack()
	s := string(fsys["p/pack.yaml"].Data)
	s = strings.Replace(s, "  caps: {unitClaims: 10}\n", "  kinds:\n"+kinds, 1)
	fsys["p/pack.yaml"] = &fstest.MapFile{Data: []byte(s)}
	fsys["p/contract.md"] = &fstest.MapFile{Data: []byte(contract)}
	return fsys
}

const orderKinds = `    orderClaims:
      cap: 5
      fields:
        order: string
        amount: number
        placed: date
        claim: string
        evidenceLevel: level
        evidence: evidence
        alternatives: strings
      required: [order, claim]
      aliases: {claim: [event]}
`

const orderContract = "End with [claims]: orderClaims, each with order, amount, placed, claim, evidenceLevel, evidence, alternatives.\n\n" +
	"[claims]\n```json\n{\"orderClaims\": [{\"order\": \"A1\", \"claim\": \"shipped\", \"event\": \"x\"}]}\n```\n"

func TestClaimKindsLoadInOrder(t *testing.T) {
	t.Parallel()
	p, err := LoadPack(kindsPack(orderKinds+"    noteClaims:\n      fields: {text: string}\n", orderContract+"noteClaims text"), "p")
	if err != nil {
		t.Fatal(err)
	}
	kinds := p.Claims.ClaimKinds()
	if got := strings.Join(kinds.Names(), ","); got != "orderClaims,noteClaims" {
		t.Fatalf("kinds = %s", got)
	}
	k := kinds[0]
	if k.Cap != 5 || kinds[1].Cap != DefaultClaimKindCap {
		t.Errorf("caps = %d, %d", k.Cap, kinds[1].Cap)
	}
	if got := strings.Join(k.FieldOrder, ","); got != "order,amount,placed,claim,evidenceLevel,evidence,alternatives" {
		t.Errorf("field order = %s", got)
	}
	if k.Fields["amount"] != FieldNumber || k.LevelField() != "evidenceLevel" || k.EvidenceField() != "evidence" {
		t.Errorf("fields = %v", k.Fields)
	}
	if k.Pos.Line != 18 || k.Pos.Column != 5 {
		t.Errorf("orderClaims at %v, want 18:5", k.Pos)
	}
	if k.aliasOf("event") != "claim" || strings.Join(k.Required, ",") != "order,claim" {
		t.Errorf("aliases %v, required %v", k.Aliases, k.Required)
	}
}

func TestRA3DeclaresTheSeedKinds(t *testing.T) {
	t.Parallel()
	declared := ra3Pack(t).Claims.Kinds
	want := DefaultClaimKinds(nil)
	if len(declared) != len(want) {
		t.Fatalf("ra3 declares %d kinds", len(declared))
	}
	for i, k := range declared {
		w := want[i]
		if k.Name != w.Name || k.Cap != w.Cap || strings.Join(k.FieldOrder, ",") != strings.Join(w.FieldOrder, ",") ||
			strings.Join(k.Required, ",") != strings.Join(w.Required, ",") || len(k.Codes) != len(w.Codes) || len(k.Aliases) != len(w.Aliases) {
			t.Errorf("kind %d = %+v\nwant %+v", i, k, w)
		}
		for f, typ := range w.Fields {
			if k.Fields[f] != typ {
				t.Errorf("%s.%s is %s, want %s", k.Name, f, k.Fields[f], typ)
			}
		}
		for f, c := range w.Codes {
			if got := k.Codes[f]; got.Code != c.Code || strings.Join(got.ArgOrder, ",") != strings.Join(c.ArgOrder, ",") {
				t.Errorf("%s code for %s = %+v, want %+v", k.Name, f, got, c)
			}
		}
	}
}

func TestOldCapsStillLoad(t *testing.T) {
	t.Parallel()
	p, err := LoadPack(minimalPack(), "p")
	if err != nil {
		t.Fatal(err)
	}
	kinds := p.Claims.ClaimKinds()
	if len(kinds) != 3 || kinds[0].Name != "unitClaims" || kinds[0].Cap != 10 || kinds[1].Cap != DefaultEventClaimsCap {
		t.Fatalf("kinds = %+v", kinds)
	}
}

func TestClaimKindErrorsNameLineAndColumn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, kinds, contract, want string
	}{
		{"unknown type", strings.Replace(orderKinds, "amount: number", "amount: money", 1), orderContract,
			`p/pack.yaml:22:17: claims.kinds.orderClaims.fields.amount: unknown type "money" (want one of string, int, id, number`},
		{"required not declared", strings.Replace(orderKinds, "[order, claim]", "[order, clam]", 1), orderContract,
			`p/pack.yaml:28:25: claims.kinds.orderClaims.required: "clam" is not a declared field`},
		{"alias clash", strings.Replace(orderKinds, "[event]", "[order]", 1), orderContract,
			`p/pack.yaml:29:17: claims.kinds.orderClaims.aliases.claim: alias "order" clashes with the declared field "order"`},
		{"two level fields", strings.Replace(orderKinds, "alternatives: strings", "alternatives: level", 1), orderContract,
			`p/pack.yaml:27:9: claims.kinds.orderClaims.fields.alternatives: a kind has at most one level field (evidenceLevel is one already)`},
		{"unknown key", orderKinds + "      requird: [x]\n", orderContract,
			`p/pack.yaml:30:7: claims.kinds.orderClaims.requird: unknown key (want cap, fields, required, codes or aliases)`},
		{"negative cap", strings.Replace(orderKinds, "cap: 5", "cap: -1", 1), orderContract,
			`p/pack.yaml:19:12: claims.kinds.orderClaims.cap: must be positive`},
		{"code for a field not required", orderKinds + "      codes: {amount: order.no_amount}\n", orderContract,
			`p/pack.yaml:30:15: claims.kinds.orderClaims.codes.amount: "amount" is not a required field`},
		{"code argument not a field", orderKinds + "      codes: {order: {code: order.missing, args: {id: ordr}}}\n", orderContract,
			`claims.kinds.orderClaims.codes.order.args.id: "ordr" is not a declared field`},
		{"bad kind name", strings.Replace(orderKinds, "orderClaims:", "order.Claims:", 1), strings.Replace(orderContract, "orderClaims", "order.Claims", -1),
			`p/pack.yaml:18:5: claims.kinds.order.Claims: a kind name is a JSON key`},
		{"kind not mentioned", orderKinds, strings.Replace(orderContract, "orderClaims", "claims", -1),
			`p/pack.yaml:18:5: claims.kinds.orderClaims: the contract (contract.md) never mentions the kind "orderClaims"`},
		{"field not mentioned", orderKinds, strings.Replace(orderContract, "placed, ", "", 1),
			`p/pack.yaml:23:9: claims.kinds.orderClaims.fields.placed: the contract (contract.md) never mentions the field "placed"`},
		{"undeclared array in the example", orderKinds, orderContract + "[claims]\n```json\n{\"orderClaims\": [],\n \"refundClaims\": []}\n```\n",
			`p/contract.md:10:2: the example's claims array "refundClaims" is not a declared kind (claims.kinds: orderClaims)`},
		{"undeclared field in the example", orderKinds, strings.Replace(orderContract, `"event": "x"`, `"status": "x"`, 1),
			`p/contract.md:5:54: the example's orderClaims claim has the field "status", which claims.kinds.orderClaims does not declare`},
		{"example not JSON", orderKinds, orderContract + "[claims]\n```json\n{\"orderClaims\": [}\n```\n",
			`p/contract.md:9:1: the claims block example is not valid JSON`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadPack(kindsPack(tc.kinds, tc.contract), "p")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEmptyKindsFail(t *testing.T) {
	t.Parallel()
	fsys := kindsPack("", orderContract)
	s := strings.Replace(string(fsys["p/pack.yaml"].Data), "  kinds:\n", "  kinds: {}\n", 1)
	fsys["p/pack.yaml"] = &fstest.MapFile{Data: []byte(s)}
	if _, err := LoadPack(fsys, "p"); err == nil || !strings.Contains(err.Error(), "claims.kinds: empty") {
		t.Fatalf("error = %v", err)
	}
}

func TestEvidenceFieldNeedsEvidenceFormats(t *testing.T) {
	t.Parallel()
	fsys := kindsPack(orderKinds, orderContract)
	s := string(fsys["p/pack.yaml"].Data)
	s = strings.Replace(s, "  evidence:\n    build: [asset, unit]\n", "", 1)
	fsys["p/pack.yaml"] = &fstest.MapFile{Data: []byte(s)}
	_, err := LoadPack(fsys, "p")
	if want := `claims.kinds.orderClaims.fields.evidence: an evidence field needs the pack's evidence formats (facts.evidence)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v\nwant %q", err, want)
	}
}

func TestKindsAndCapsTogetherFail(t *testing.T) {
	t.Parallel()
	fsys := kindsPack(orderKinds, orderContract)
	s := strings.Replace(string(fsys["p/pack.yaml"].Data), "  kinds:\n", "  caps: {unitClaims: 3}\n  kinds:\n", 1)
	fsys["p/pack.yaml"] = &fstest.MapFile{Data: []byte(s)}
	if _, err := LoadPack(fsys, "p"); err == nil || !strings.Contains(err.Error(), "claims.caps: drop it") {
		t.Fatalf("error = %v", err)
	}
}

func TestDnDLoadsWithoutClaims(t *testing.T) {
	t.Parallel()
	reg, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if p := reg.Pack("dnd"); p == nil || p.Claims != nil {
		t.Fatalf("dnd = %+v", p)
	}
}
