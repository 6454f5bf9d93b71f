package facts

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors/reqcontext"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// Record is one JSON record of a record set (knowledge.RecordRule): an object
// the request carried — an order a tool returned, an invoice in a user message —
// with the fields its rule declares, converted to their types.
type Record struct {
	// Set is the record set ("orders").
	Set string
	// Key is the value of the set's key field, as text ("A-1001", "1001").
	Key string
	// Source says where the record came from: the message's role and its
	// 1-based number among the request's messages ("tool message 3").
	Source string
	// fields are the declared fields the record has, sorted by name.
	fields []recordField
}

type recordField struct {
	name  string
	value any
}

// Field returns the value of a declared field: a string, float64 (number),
// int64 (int), bool, time.Time (date) or []string (strings). ok is false when
// the record lacks the field or its value does not convert to the declared type.
func (r Record) Field(name string) (any, bool) {
	i, ok := slices.BinarySearchFunc(r.fields, name, func(f recordField, n string) int { return strings.Compare(f.name, n) })
	if !ok {
		return nil, false
	}
	return r.fields[i].value, true
}

// Fields returns the names of the fields the record has, sorted.
func (r Record) Fields() []string {
	out := make([]string, len(r.fields))
	for i, f := range r.fields {
		out[i] = f.name
	}
	return out
}

// Map returns the record's fields as a new map, name -> value (as Field).
func (r Record) Map() map[string]any {
	m := make(map[string]any, len(r.fields))
	for _, f := range r.fields {
		m[f.name] = f.value
	}
	return m
}

// recordSet is one set's records in an index: in order of first appearance,
// one per key (a later record with the same key replaces the earlier: the
// latest tool result is the current state).
type recordSet struct {
	name  string
	recs  []Record
	byKey map[string]int
}

func (s *recordSet) add(r Record) {
	if s.byKey == nil {
		s.byKey = map[string]int{}
	}
	if i, ok := s.byKey[r.Key]; ok {
		s.recs[i] = r
		return
	}
	s.byKey[r.Key] = len(s.recs)
	s.recs = append(s.recs, r)
}

// Records returns the records of set in order of first appearance (one per
// key), shared with the index; nil when the request carried none.
func (ix *Index) Records(set string) []Record {
	if s := ix.recordSet(set); s != nil {
		return s.recs
	}
	return nil
}

// Record returns the record of set whose key field is key.
func (ix *Index) Record(set, key string) (Record, bool) {
	if s := ix.recordSet(set); s != nil {
		if i, ok := s.byKey[key]; ok {
			return s.recs[i], true
		}
	}
	return Record{}, false
}

// RecordSets returns the names of the record sets that hold records, sorted.
func (ix *Index) RecordSets() []string {
	if ix == nil {
		return nil
	}
	out := make([]string, 0, len(ix.recordSets))
	for i := range ix.recordSets {
		out = append(out, ix.recordSets[i].name)
	}
	return out
}

// RecordCount returns how many records the index holds, over all sets.
func (ix *Index) RecordCount() int {
	if ix == nil {
		return 0
	}
	n := 0
	for i := range ix.recordSets {
		n += len(ix.recordSets[i].recs)
	}
	return n
}

// RecordsSkipped counts the objects at a record rule's path that were not
// records: not an object, or without the key field.
func (ix *Index) RecordsSkipped() int {
	if ix == nil {
		return 0
	}
	return ix.recordsSkipped
}

func (ix *Index) recordSet(set string) *recordSet {
	if ix == nil {
		return nil
	}
	for i := range ix.recordSets {
		if ix.recordSets[i].name == set {
			return &ix.recordSets[i]
		}
	}
	return nil
}

// setRecordSets installs sets, sorted by name, dropping empty ones.
func (ix *Index) setRecordSets(sets []recordSet) {
	out := sets[:0]
	for _, s := range sets {
		if len(s.recs) > 0 {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	ix.recordSets = slices.Clip(out)
}

// RoleText is the text of one message of a request, with its role and its
// 1-based number among the request's messages: what record rules read.
type RoleText struct {
	Role string
	// N is the message's 1-based number in the request (0: unknown).
	N    int
	Text string
}

// The field types of knowledge.RecordRule.
const (
	typeString  = "string"
	typeNumber  = "number"
	typeInt     = "int"
	typeBool    = "bool"
	typeDate    = "date"
	typeStrings = "strings"
)

// recordRule is a compiled knowledge.RecordRule.
type recordRule struct {
	set    string
	roles  []string
	path   string
	key    string
	fields []fieldSpec // sorted by name
}

type fieldSpec struct{ name, typ string }

func compileRecords(rules []knowledge.RecordRule) ([]recordRule, error) {
	var out []recordRule
	seen := map[string]bool{}
	for i := range rules {
		r := &rules[i]
		if r.Set == "" {
			return nil, fmt.Errorf("facts: records[%d]: no set name", i)
		}
		if seen[r.Set] {
			return nil, fmt.Errorf("facts: records[%d]: set %q is declared twice", i, r.Set)
		}
		seen[r.Set] = true
		c := recordRule{set: r.Set, roles: slices.Clone(r.Roles()), path: r.Path, key: r.Key}
		for _, name := range r.FieldNames() {
			typ := r.Fields[name]
			if !slices.Contains(knowledge.RecordFieldTypes, typ) {
				return nil, fmt.Errorf("facts: records[%d] (set %q): field %q has unknown type %q", i, r.Set, name, typ)
			}
			c.fields = append(c.fields, fieldSpec{name, typ})
		}
		if _, ok := r.Fields[r.Key]; !ok || r.Key == "" {
			return nil, fmt.Errorf("facts: records[%d] (set %q): key %q is not a declared field", i, r.Set, r.Key)
		}
		out = append(out, c)
	}
	return out, nil
}

// HasRecords reports whether the rules declare record sets.
func (x *Extractor) HasRecords() bool { return x != nil && len(x.records) > 0 }

// RecordRoles returns the message roles the record rules read, sorted; nil
// when the rules declare none.
func (x *Extractor) RecordRoles() []string {
	if x == nil {
		return nil
	}
	var out []string
	for _, r := range x.records {
		for _, role := range r.roles {
			if !slices.Contains(out, role) {
				out = append(out, role)
			}
		}
	}
	slices.Sort(out)
	return out
}

// readsRole reports whether a record rule reads messages of role.
func (x *Extractor) readsRole(role string) bool {
	for _, r := range x.records {
		if slices.Contains(r.roles, role) {
			return true
		}
	}
	return false
}

// ExtractRequest reads one request into a fact index: the operations from its
// user texts (as ExtractTexts), the records from messages, the texts of the
// request's messages of the roles the record rules read, in request order.
// Messages whose JSON does not parse are ignored.
func (x *Extractor) ExtractRequest(user []string, messages []RoleText) (*Index, error) {
	ix, err := x.ExtractTexts(user...)
	if err != nil || len(x.records) == 0 {
		return ix, err
	}
	x.readRecords(ix, messages)
	return ix, nil
}

// readRecords adds the records of messages to ix, which nothing shares yet.
func (x *Extractor) readRecords(ix *Index, messages []RoleText) {
	sets := make([]recordSet, len(x.records))
	for i := range x.records {
		sets[i].name = x.records[i].set
	}
	budget := x.maxBytes
	for _, m := range messages {
		if m.Text == "" || !x.readsRole(m.Role) {
			continue
		}
		if budget -= len(m.Text); budget < 0 {
			ix.truncated = true
			break
		}
		docs := jsonDocuments(m.Text)
		if len(docs) == 0 {
			continue
		}
		source := m.Role + " message"
		if m.N > 0 {
			source += " " + strconv.Itoa(m.N)
		}
		for ri := range x.records {
			rule := &x.records[ri]
			if !slices.Contains(rule.roles, m.Role) {
				continue
			}
			for _, doc := range docs {
				ix.recordsSkipped += rule.read(doc, source, &sets[ri])
			}
		}
	}
	ix.setRecordSets(sets)
}

// read adds the records of doc to set and returns how many objects at the
// rule's path it skipped (not an object, no key).
func (r *recordRule) read(doc, source string, set *recordSet) (skipped int) {
	var at gjson.Result
	if r.path == "" {
		at = gjson.Parse(doc)
	} else {
		at = gjson.Get(doc, r.path)
	}
	one := func(obj gjson.Result) {
		if !obj.IsObject() {
			skipped++
			return
		}
		rec, ok := r.record(obj, source)
		if !ok {
			skipped++
			return
		}
		set.add(rec)
	}
	switch {
	case at.IsArray():
		at.ForEach(func(_, v gjson.Result) bool { one(v); return true })
	case at.IsObject():
		one(at)
	}
	return skipped
}

// record reads one object; false when it has no usable key.
func (r *recordRule) record(obj gjson.Result, source string) (Record, bool) {
	rec := Record{Set: r.set, Source: source}
	members := map[string]gjson.Result{}
	obj.ForEach(func(k, v gjson.Result) bool {
		if _, dup := members[k.Str]; !dup {
			members[k.Str] = v
		}
		return true
	})
	key, ok := members[r.key]
	if !ok {
		return Record{}, false
	}
	switch key.Type {
	case gjson.String:
		rec.Key = key.Str
	case gjson.Number:
		rec.Key = key.Raw
	default:
		return Record{}, false
	}
	if strings.TrimSpace(rec.Key) == "" {
		return Record{}, false
	}
	for _, f := range r.fields {
		v, ok := members[f.name]
		if !ok {
			continue
		}
		if val, ok := convertField(v, f.typ); ok {
			rec.fields = append(rec.fields, recordField{f.name, val})
		}
	}
	return rec, true
}

// dateLayouts are the ISO 8601 forms a date field accepts.
var dateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02"}

// ParseDate reads an ISO 8601 date or date-time (2026-03-01,
// 2026-03-01T10:30:00Z, 2026-03-01 10:30:00); false when s is none of them.
// A date without a zone is UTC.
func ParseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// convertField converts a JSON value to a field type; false when it does not
// convert.
func convertField(v gjson.Result, typ string) (any, bool) {
	switch typ {
	case typeString:
		switch v.Type {
		case gjson.String:
			return v.Str, true
		case gjson.Number:
			return v.Raw, true
		case gjson.True, gjson.False:
			return v.Raw, true
		}
	case typeNumber:
		switch v.Type {
		case gjson.Number:
			return v.Num, true
		case gjson.String:
			f, err := strconv.ParseFloat(strings.TrimSpace(v.Str), 64)
			return f, err == nil
		}
	case typeInt:
		switch v.Type {
		case gjson.Number:
			if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
				return n, true
			}
			if v.Num == float64(int64(v.Num)) {
				return int64(v.Num), true
			}
		case gjson.String:
			n, err := strconv.ParseInt(strings.TrimSpace(v.Str), 10, 64)
			return n, err == nil
		}
	case typeBool:
		switch v.Type {
		case gjson.True:
			return true, true
		case gjson.False:
			return false, true
		case gjson.String:
			b, err := strconv.ParseBool(strings.TrimSpace(v.Str))
			return b, err == nil
		}
	case typeDate:
		if v.Type == gjson.String {
			return ParseDate(v.Str)
		}
	case typeStrings:
		switch {
		case v.IsArray():
			var out []string
			ok := true
			v.ForEach(func(_, e gjson.Result) bool {
				switch e.Type {
				case gjson.String:
					out = append(out, e.Str)
				case gjson.Number:
					out = append(out, e.Raw)
				default:
					ok = false
				}
				return ok
			})
			if out == nil {
				out = []string{}
			}
			return out, ok
		case v.Type == gjson.String:
			return []string{v.Str}, true
		}
	}
	return nil, false
}

// maxJSONStarts bounds the places in a text tried as the start of its first
// JSON document, so prose full of braces costs little.
const maxJSONStarts = 64

// jsonDocuments returns the JSON documents of a message's text: the whole text
// when it is one; else its ```json fences that parse; else the first JSON object
// or array in it. nil when there is none.
func jsonDocuments(text string) []string {
	t := strings.TrimSpace(text)
	if t == "" {
		return nil
	}
	if (t[0] == '{' || t[0] == '[') && gjson.Valid(t) {
		return []string{t}
	}
	var docs []string
	fenced := false
	for rest := t; ; {
		i := fenceStart(rest)
		if i < 0 {
			break
		}
		fenced = true
		rest = rest[i:]
		end := strings.Index(rest, "```")
		body := rest
		if end >= 0 {
			body, rest = rest[:end], rest[end+3:]
		} else {
			rest = ""
		}
		if b := strings.TrimSpace(body); b != "" && gjson.Valid(b) {
			docs = append(docs, b)
		}
	}
	if fenced {
		return docs
	}
	tries := 0
	for off := 0; off < len(t) && tries < maxJSONStarts; {
		i := strings.IndexAny(t[off:], "{[")
		if i < 0 {
			break
		}
		off += i
		tries++
		if end := jsonEnd(t[off:]); end > 0 && gjson.Valid(t[off:off+end]) {
			return []string{t[off : off+end]}
		}
		off++
	}
	return nil
}

// fenceStart returns the offset just past the next "```json" (any case) in s,
// or -1.
func fenceStart(s string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], "```")
		if i < 0 {
			return -1
		}
		off += i + 3
		if len(s)-off >= 4 && strings.EqualFold(s[off:off+4], "json") {
			return off + 4
		}
	}
}

// recordsKey is the fact key of a request under rules with records: SourceKey
// over the user texts, then each message the record rules read, after a line
// naming its role and number (so the same JSON in another role, or moved, keys
// differently). "" when there is no text at all.
func recordsKey(version string, user []string, messages []RoleText) string {
	if !hasText(user) && len(messages) == 0 {
		return ""
	}
	texts := make([]string, 0, len(user)+1+2*len(messages))
	texts = append(texts, user...)
	texts = append(texts, "\x00records")
	for _, m := range messages {
		texts = append(texts, "\x00"+m.Role+" "+strconv.Itoa(m.N), m.Text)
	}
	return SourceKey(version, texts...)
}

// roleTexts returns the texts of body's messages whose role x's record rules
// read, in order, numbered among all the messages. A content that is a string
// is its text; an array of parts gives its text parts joined by line breaks.
func roleTexts(body []byte, x *Extractor) []RoleText {
	ml, ok := reqcontext.FindMessages(body)
	if !ok {
		return nil
	}
	var out []RoleText
	for i, m := range ml.Items {
		if m.ContentEnd == 0 || !x.readsRole(m.Role) {
			continue
		}
		content := m.Content(body)
		var text string
		switch content[0] {
		case '"':
			text, _ = rawjson.StringValue(string(content))
			text = strings.Clone(text)
		case '[':
			var parts []string
			rawjson.EachElement(string(content), func(part rawjson.Value) bool {
				var typ, t string
				rawjson.EachMember(part.Raw, func(mm rawjson.Member) bool {
					switch {
					case rawjson.KeyIs(mm.Key, "type"):
						typ, _ = rawjson.StringValue(mm.Raw)
					case rawjson.KeyIs(mm.Key, "text"):
						t, _ = rawjson.StringValue(mm.Raw)
					}
					return true
				})
				if t != "" && (typ == "text" || typ == "input_text" || typ == "output_text") {
					parts = append(parts, strings.Clone(t))
				}
				return true
			})
			text = strings.Join(parts, "\n")
		}
		if text != "" {
			out = append(out, RoleText{Role: m.Role, N: i + 1, Text: text})
		}
	}
	return out
}

// jsonEnd returns the length of the bracketed value s starts with ({ or [),
// by counting brackets outside strings; 0 when they do not close.
func jsonEnd(s string) int {
	depth := 0
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if in {
			switch c {
			case '\\':
				i++
			case '"':
				in = false
			}
			continue
		}
		switch c {
		case '"':
			in = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// ExtractBody reads a chat completion request body into a fact index, as the
// facts stage does: the operations from its user texts, the records from the
// messages the record rules read. For tools and chains without a facts stage.
func (x *Extractor) ExtractBody(body []byte) (*Index, error) {
	var messages []RoleText
	if x.HasRecords() {
		messages = roleTexts(body, x)
	}
	return x.ExtractRequest(reqcontext.UserTexts(body), messages)
}

// BodyKey returns the fact key of a request body as the facts stage computes
// it ("" when the body has no text the rules read).
func (x *Extractor) BodyKey(body []byte) string {
	user := reqcontext.UserTexts(body)
	if x.HasRecords() {
		return recordsKey(x.version, user, roleTexts(body, x))
	}
	if !hasText(user) {
		return ""
	}
	return SourceKey(x.version, user...)
}

// ExtractFile reads a facts file — an operation log, or JSON carrying records —
// into a fact index: the operations as ExtractTexts reads them, and the records
// of every record rule, whatever roles it reads (a file has none). For offline
// checks (factgate check, POST /v1/check).
func (x *Extractor) ExtractFile(text string) (*Index, error) {
	ix, err := x.ExtractTexts(text)
	if err != nil || len(x.records) == 0 {
		return ix, err
	}
	sets := make([]recordSet, len(x.records))
	for i := range x.records {
		sets[i].name = x.records[i].set
	}
	if len(text) <= x.maxBytes {
		for _, doc := range jsonDocuments(text) {
			for ri := range x.records {
				ix.recordsSkipped += x.records[ri].read(doc, "facts file", &sets[ri])
			}
		}
	} else {
		ix.truncated = true
	}
	ix.setRecordSets(sets)
	return ix, nil
}

// HasJSONDocument reports whether text is, or carries, a JSON object or array
// (as record rules find one: the whole text, a ```json fence, or the first
// document in it).
func HasJSONDocument(text string) bool { return len(jsonDocuments(text)) > 0 }

// recordsNote is the trace note of an index's records: "facts: records orders
// 2 (1 skipped: not an object or no key)".
func recordsNote(ix *Index) string {
	var b strings.Builder
	b.WriteString("facts: records")
	for i, name := range ix.RecordSets() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s %d", name, len(ix.Records(name)))
	}
	if ix.RecordCount() == 0 {
		b.WriteString(" none")
	}
	if n := ix.RecordsSkipped(); n > 0 {
		fmt.Fprintf(&b, " (%d skipped: not an object, or no key)", n)
	}
	return b.String()
}

// overlayRecords returns merged with own's records laid over its own: in a
// session, the request's own records are the current state (a session's
// segments are ordered by game time, which records do not have). merged is not
// modified; without records of own it is returned as it is.
func overlayRecords(merged, own *Index) *Index {
	if merged == nil || own == nil || merged == own || len(own.recordSets) == 0 {
		return merged
	}
	out := *merged // shares the immutable operations and tables
	var sets []recordSet
	for _, ix := range [...]*Index{merged, own} {
		for i := range ix.recordSets {
			src := &ix.recordSets[i]
			j := slices.IndexFunc(sets, func(s recordSet) bool { return s.name == src.name })
			if j < 0 {
				sets = append(sets, recordSet{name: src.name})
				j = len(sets) - 1
			}
			for _, r := range src.recs {
				sets[j].add(r)
			}
		}
	}
	out.setRecordSets(sets)
	return &out
}
