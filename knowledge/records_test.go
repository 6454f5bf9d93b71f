package knowledge

import (
	"strings"
	"testing"
	"testing/fstest"
)

// recordsPack is minimalPack with its ops replaced by a record set.
func recordsPack(records string) fstest.MapFS {
	fsys := minimalPack()
	s := string(fsys["p/pack.yaml"].Data)
	start, end := strings.Index(s, "facts:\n"), strings.Index(s, "claims:\n")
	s = s[:start] + "facts:\n  version: v1\n" + records + s[end:]
	fsys["p/pack.yaml"] = &fstest.MapFile{Data: []byte(s)}
	return fsys
}

const goodRecords = `  records:
    - set: orders
      from: [user, tool]
      path: orders
      key: id
      fields:
        id: string
        total: number
`

func TestAPackMayHaveRecordsAndNoOps(t *testing.T) {
	t.Parallel()
	p, err := LoadPack(recordsPack(goodRecords), "p")
	if err != nil {
		t.Fatal(err)
	}
	r := p.Facts.Records[0]
	if r.Set != "orders" || r.Key != "id" || r.Fields["total"] != "number" || len(p.Facts.Ops) != 0 {
		t.Fatalf("records %+v", p.Facts.Records)
	}
	if got := (&RecordRule{}).Roles(); strings.Join(got, ",") != "user,tool" {
		t.Errorf("default roles %v", got)
	}
}

func TestRecordErrorsNameLineAndColumn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown type", "total: number", "total: money", `p/pack.yaml:17:9: facts.records[0].fields.total: field "total": unknown type "money"`},
		{"unknown role", "from: [user, tool]", "from: [user, robot]", `p/pack.yaml:12:20: facts.records[0].from[1]: unknown role "robot"`},
		{"key not a field", "key: id", "key: number", `p/pack.yaml:14:7: facts.records[0].key: key "number" is not one of the declared fields (id, total)`},
		{"no set", "set: orders", "set: ''", `p/pack.yaml:11:7: facts.records[0]: missing`},
		{"no key", "      key: id\n", "", `facts.records[0]: missing: the field that identifies a record`},
		{"twice", "        total: number\n", "        total: number\n    - {set: orders, key: id, fields: {id: string}}\n", `p/pack.yaml:18:8: facts.records[1].set: set "orders" is declared already`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadPack(recordsPack(strings.Replace(goodRecords, tc.old, tc.new, 1)), "p")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := LoadPack(recordsPack(""), "p"); err == nil || !strings.Contains(err.Error(), "no operation rules (ops) and no records") {
		t.Errorf("facts without ops or records: %v", err)
	}
}

// roleHeads are texts by role, as the request's messages.
type roleHeads map[string][]string

func (h roleHeads) Count() int                   { return 0 }
func (h roleHeads) Head(int, int) (string, bool) { return "", false }
func (h roleHeads) RoleMentions(roles []string, s string) bool {
	for _, r := range roles {
		for _, t := range h[r] {
			if strings.Contains(t, s) {
				return true
			}
		}
	}
	return false
}

func TestAppliesRecords(t *testing.T) {
	t.Parallel()
	fsys := recordsPack(goodRecords)
	fsys["p/pack.yaml"].Data = append(fsys["p/pack.yaml"].Data, "applies: {records: true}\n"...)
	p, err := LoadPack(fsys, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		heads roleHeads
		want  bool
	}{
		{roleHeads{"tool": {`{"orders":[{"id":"A"}]}`}}, true},
		{roleHeads{"user": {`my "orders": [...]`}}, true},
		{roleHeads{"system": {`{"orders":[]}`}}, false}, // a role the rule does not read
		{roleHeads{"tool": {`{"weather":"fine"}`}}, false},
	} {
		if got := p.Applies(ApplyInput{Heads: tc.heads}).Contract; got != tc.want {
			t.Errorf("%v: applies %v, want %v", tc.heads, got, tc.want)
		}
	}
	bad := minimalPack()
	bad["p/pack.yaml"].Data = append(bad["p/pack.yaml"].Data, "applies: {records: true}\n"...)
	if _, err := LoadPack(bad, "p"); err == nil || !strings.Contains(err.Error(), "applies.records: true, but the pack declares no facts.records") {
		t.Errorf("records without records: %v", err)
	}
}
