package knowledge

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RecordRule reads records — JSON objects the request carries, like the
// customer's orders a tool returned — into a named record set that rules look up
// by key (facts.records in pack.yaml):
//
//	facts:
//	  records:
//	    - set: orders
//	      from: [user, tool]
//	      path: orders
//	      key: id
//	      fields: {id: string, status: string, total: number, placed: date}
//
// The contents of the messages of the roles in From are searched for JSON: the
// whole content when it is a JSON document, else every ```json fence in it, else
// the first JSON object or array in the text. Path (gjson syntax, "" = the
// document itself) addresses an array of objects or one object in the document;
// each object with the Key field is a record, with the declared Fields converted
// to their types.
type RecordRule struct {
	// Set names the record set ("orders"); rules call record("orders", key).
	Set string `yaml:"set"`
	// From lists the message roles searched: user, tool, system, developer,
	// assistant. Empty: user and tool.
	From []string `yaml:"from"`
	// Path is the gjson path of the records in a document ("orders",
	// "data.items"); "" is the document itself (an array, or one object).
	Path string `yaml:"path"`
	// Key is the field that identifies a record; it must be one of Fields.
	Key string `yaml:"key"`
	// Fields are the fields kept, with their types: string, number, int, bool,
	// date (ISO 8601 date or date-time), strings (a list of strings).
	Fields map[string]string `yaml:"fields"`
}

// RecordFieldTypes are the types a record field may declare.
var RecordFieldTypes = []string{"string", "number", "int", "bool", "date", "strings"}

// RecordRoles are the message roles a record rule may read.
var RecordRoles = []string{"user", "tool", "system", "developer", "assistant"}

// DefaultRecordRoles are the roles a record rule without from reads.
var DefaultRecordRoles = []string{"user", "tool"}

// Roles returns the rule's roles (From, or DefaultRecordRoles).
func (r *RecordRule) Roles() []string {
	if len(r.From) == 0 {
		return DefaultRecordRoles
	}
	return r.From
}

// FieldNames returns the declared field names, sorted.
func (r *RecordRule) FieldNames() []string { return sortedKeys(r.Fields) }

// records checks facts.records, naming each problem at its place in pack.yaml
// (file:line:column).
func (l *packLoader) records(manifest []byte) {
	f := l.p.Facts
	if f == nil || len(f.Records) == 0 {
		return
	}
	var root yaml.Node
	_ = yaml.Unmarshal(manifest, &root) // it decoded already
	fail := func(msg string, path ...any) {
		line, col := yamlPos(&root, path...)
		key := yamlPathString(path)
		if line > 0 {
			l.errs = append(l.errs, fmt.Errorf("%s:%d:%d: %s: %s", l.file(PackFile), line, col, key, msg))
			return
		}
		l.fail(PackFile, key, "%s", msg)
	}
	seen := map[string]int{}
	for i := range f.Records {
		r := &f.Records[i]
		base := []any{"facts", "records", i}
		with := func(more ...any) []any { return append(slices.Clip(base), more...) }
		switch {
		case r.Set == "":
			fail("missing: the record set's name, which rules use (record(\"orders\", id))", base...)
		case strings.TrimSpace(r.Set) != r.Set || strings.ContainsAny(r.Set, "\"\\\n"):
			fail(fmt.Sprintf("%q: a set name has no spaces around it, quotes or backslashes", r.Set), with("set")...)
		default:
			if j, dup := seen[r.Set]; dup {
				fail(fmt.Sprintf("set %q is declared already by facts.records[%d]", r.Set, j), with("set")...)
			}
			seen[r.Set] = i
		}
		for j, role := range r.From {
			if !slices.Contains(RecordRoles, role) {
				fail(fmt.Sprintf("unknown role %q (roles: %s)", role, strings.Join(RecordRoles, ", ")), with("from", j)...)
			}
		}
		if strings.TrimSpace(r.Path) != r.Path {
			fail(fmt.Sprintf("%q: a path has no spaces around it", r.Path), with("path")...)
		}
		if len(r.Fields) == 0 {
			fail("no fields: declare at least the key field with its type", base...)
		}
		for _, name := range sortedKeys(r.Fields) {
			if !slices.Contains(RecordFieldTypes, r.Fields[name]) {
				fail(fmt.Sprintf("field %q: unknown type %q (types: %s)", name, r.Fields[name], strings.Join(RecordFieldTypes, ", ")), with("fields", name)...)
			}
			if name == "" {
				fail("a field with an empty name", with("fields")...)
			}
		}
		switch {
		case r.Key == "":
			fail("missing: the field that identifies a record", base...)
		case len(r.Fields) > 0 && !hasKey(r.Fields, r.Key):
			fail(fmt.Sprintf("key %q is not one of the declared fields (%s)", r.Key, strings.Join(sortedKeys(r.Fields), ", ")), with("key")...)
		case r.Fields[r.Key] == "bool" || r.Fields[r.Key] == "strings":
			fail(fmt.Sprintf("key %q has type %s: a key is a string, a number or a date", r.Key, r.Fields[r.Key]), with("key")...)
		}
	}
}

// yamlPos returns the line and column (1-based) of the node at path in a YAML
// document: for a mapping key, the key itself; 0, 0 when the path does not
// lead anywhere. The longest prefix found is used, so a missing key names its
// parent's place.
func yamlPos(doc *yaml.Node, path ...any) (line, col int) {
	n := doc
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n == nil {
		return 0, 0
	}
	line, col = n.Line, n.Column
	for _, step := range path {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch s := step.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line, col
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == s {
					line, col = n.Content[i].Line, n.Content[i].Column
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line, col
			}
		case int:
			if n.Kind != yaml.SequenceNode || s < 0 || s >= len(n.Content) {
				return line, col
			}
			n = n.Content[s]
			line, col = n.Line, n.Column
		}
	}
	return line, col
}

// yamlPathString renders a path as the key it names: facts.records[0].key.
func yamlPathString(path []any) string {
	var b strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		}
	}
	return b.String()
}
