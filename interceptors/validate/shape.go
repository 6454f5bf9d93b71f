package validate

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// ShapeValidatorName is the Validator of the issues the answer shape validator
// reports.
const ShapeValidatorName = "shape"

// The issue codes of the answer shape validator (a pack with an `answer:` shape, such
// as the D&D scene description). Fatal ones make the answer unusable as it is: the
// LLM-backed validators do not run on it and the hidden revision asks for a new one.
const (
	// CodeAnswerMissing (Fatal): the answer holds no JSON object at all.
	CodeAnswerMissing = "answer.missing"
	// CodeAnswerMultiple (Fatal): the answer holds several JSON objects (or fenced
	// JSON blocks); exactly one is expected.
	CodeAnswerMultiple = "answer.multiple"
	// CodeAnswerJSONInvalid (Fatal): the answer's JSON does not parse, or is not an
	// object.
	CodeAnswerJSONInvalid = "answer.json_invalid"
	// CodeAnswerFieldMissing (Fatal): a field of the shape is absent.
	CodeAnswerFieldMissing = "answer.field_missing"
	// CodeAnswerFieldType (Fatal): a field has another JSON type than the shape says
	// (null included).
	CodeAnswerFieldType = "answer.field_type"
	// CodeAnswerEnumInvalid (Fatal): a field with an enum holds a value outside it
	// (the scene kind "battle").
	CodeAnswerEnumInvalid = "answer.enum_invalid"
	// CodeAnswerFieldEmpty (Warning): a string field is blank.
	CodeAnswerFieldEmpty = "answer.field_empty"
	// CodeAnswerFieldUnknown (Warning): the object has a field the shape does not
	// declare.
	CodeAnswerFieldUnknown = "answer.field_unknown"
	// CodeAnswerExtraText (Warning): there is text before or after the object (or its
	// fence); the contract asks for the object alone.
	CodeAnswerExtraText = "answer.extra_text"
)

// ShapeValidator checks that an answer is exactly one JSON object with the fields,
// types and enum values of the pack's answer shape (knowledge.AnswerShape). The
// object may stand alone or in one fenced block (``` or ```json); a byte order mark
// and surrounding white space are ignored. The JSON must be strict: the application
// parses it as it is.
//
// It is deterministic, makes no model call, never modifies the answer and is safe for
// concurrent use. Messages come from the pack's templates for the codes, else from
// the English text of this package; they never show codes or paths.
type ShapeValidator struct {
	pack   *knowledge.Pack
	shape  *knowledge.AnswerShape
	fields []string // the shape's fields, sorted
}

// NewShapeValidator builds the shape validator of a pack. It fails for a nil pack or
// a pack without an answer shape.
func NewShapeValidator(pack *knowledge.Pack) (*ShapeValidator, error) {
	if pack == nil {
		return nil, errors.New("answer shape: no pack")
	}
	if pack.Answer == nil {
		return nil, errors.New("answer shape: pack " + pack.Name + " declares no answer shape (answer: in its pack.yaml)")
	}
	s := &ShapeValidator{pack: pack, shape: pack.Answer}
	for f := range pack.Answer.Fields {
		s.fields = append(s.fields, f)
	}
	slices.Sort(s.fields)
	return s, nil
}

// Name implements interceptors.AnswerValidator.
func (s *ShapeValidator) Name() string { return ShapeValidatorName }

// LLMBacked implements interceptors.AnswerValidator: the shape needs no model.
func (s *ShapeValidator) LLMBacked() bool { return false }

// ValidateAnswer implements interceptors.AnswerValidator; it never fails.
func (s *ShapeValidator) ValidateAnswer(_ context.Context, _ *interceptors.Exchange, content string) ([]interceptors.Issue, error) {
	return s.Check(content), nil
}

// Check returns the shape issues of content: the root issues first (path ""), then
// the shape's fields in name order, then fields the shape does not declare in the
// order they appear. An answer without issues gives nil.
func (s *ShapeValidator) Check(content string) []interceptors.Issue {
	loc := LocateAnswer(content)
	var issues []interceptors.Issue
	add := func(code string, sev interceptors.Severity, path string, args map[string]string) {
		is := interceptors.Issue{Code: code, Severity: sev, Path: path, Validator: ShapeValidatorName, Args: args}
		s.render(&is)
		issues = append(issues, is)
	}
	switch {
	case loc.Objects == 0 && loc.Err == "":
		add(CodeAnswerMissing, interceptors.Fatal, "", map[string]string{"fields": s.fieldList()})
		return issues
	case loc.Objects > 1:
		add(CodeAnswerMultiple, interceptors.Fatal, "", map[string]string{"count": strconv.Itoa(loc.Objects)})
		return issues
	case loc.Err != "":
		add(CodeAnswerJSONInvalid, interceptors.Fatal, "", map[string]string{"error": loc.Err, "fields": s.fieldList()})
		return issues
	}
	if loc.ExtraText {
		add(CodeAnswerExtraText, interceptors.Warning, "", nil)
	}
	obj := gjson.Parse(loc.Object)
	for _, f := range s.fields {
		want := s.shape.Fields[f]
		v := obj.Get(gjson.Escape(f))
		switch got := jsonTypeName(v); {
		case !v.Exists():
			add(CodeAnswerFieldMissing, interceptors.Fatal, f, map[string]string{"field": f, "type": want})
		case got != want:
			add(CodeAnswerFieldType, interceptors.Fatal, f, map[string]string{"field": f, "type": want, "got": got})
		case want == "string" && len(s.shape.Enums[f]) > 0 && !slices.Contains(s.shape.Enums[f], v.Str):
			add(CodeAnswerEnumInvalid, interceptors.Fatal, f, map[string]string{"field": f, "value": v.Str, "allowed": strings.Join(s.shape.Enums[f], ", ")})
		case want == "string" && strings.TrimSpace(v.Str) == "":
			add(CodeAnswerFieldEmpty, interceptors.Warning, f, map[string]string{"field": f})
		}
	}
	obj.ForEach(func(k, _ gjson.Result) bool {
		if _, ok := s.shape.Fields[k.Str]; !ok {
			add(CodeAnswerFieldUnknown, interceptors.Warning, k.Str, map[string]string{"field": k.Str, "fields": s.fieldList()})
		}
		return true
	})
	return issues
}

// fieldList names the shape's fields for messages ("kind, summary, title").
func (s *ShapeValidator) fieldList() string { return strings.Join(s.fields, ", ") }

// jsonTypeName names a JSON value's type as answer shapes do ("string", "number",
// "boolean"), or "null", "object", "array".
func jsonTypeName(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return "string"
	case gjson.Number:
		return "number"
	case gjson.True, gjson.False:
		return "boolean"
	case gjson.Null:
		return "null"
	}
	if v.IsArray() {
		return "array"
	}
	return "object"
}

// render fills the issue's message and recommendation: the pack's templates for the
// code, else the English text below.
func (s *ShapeValidator) render(is *interceptors.Issue) {
	if text, ok, err := s.pack.FormatIssue(is.Code, *is); ok && err == nil {
		is.Message, is.Recommendation.Text = text.Message, text.Recommendation
		if text.Recommendation != "" {
			return
		}
	}
	en := shapeText[is.Code]
	if is.Message == "" {
		is.Message = execute(en[0], is)
	}
	is.Recommendation.Text = execute(en[1], is)
}

// shapeText is the English message and recommendation of each shape code.
var shapeText = func() map[string][2]*template.Template {
	texts := map[string][2]string{
		CodeAnswerMissing: {
			"The answer is not a JSON object.",
			"Output exactly one JSON object with the fields {{.Args.fields}} and nothing else.",
		},
		CodeAnswerMultiple: {
			"The answer holds {{.Args.count}} JSON objects; exactly one is expected.",
			"Output exactly one JSON object and nothing else.",
		},
		CodeAnswerJSONInvalid: {
			"The answer's JSON is not a valid object{{with .Args.error}} ({{.}}){{end}}.",
			"Output exactly one valid JSON object with the fields {{.Args.fields}}: double-quoted keys and strings, no comments, no trailing commas.",
		},
		CodeAnswerFieldMissing: {
			`The answer has no "{{.Args.field}}" field.`,
			`Add "{{.Args.field}}" (a {{.Args.type}}).`,
		},
		CodeAnswerFieldType: {
			`The answer's "{{.Args.field}}" is a {{.Args.got}}, not a {{.Args.type}}.`,
			`Give "{{.Args.field}}" as a {{.Args.type}}.`,
		},
		CodeAnswerEnumInvalid: {
			`The answer's "{{.Args.field}}" is "{{.Args.value}}", which is not one of the allowed values.`,
			`Set "{{.Args.field}}" to one of: {{.Args.allowed}}.`,
		},
		CodeAnswerFieldEmpty: {
			`The answer's "{{.Args.field}}" is empty.`,
			`Fill in "{{.Args.field}}".`,
		},
		CodeAnswerFieldUnknown: {
			`The answer has a field "{{.Args.field}}" that the format does not have.`,
			"Give only the fields {{.Args.fields}}.",
		},
		CodeAnswerExtraText: {
			"The answer has text outside its JSON object.",
			"Output the JSON object alone, with no text before or after it.",
		},
	}
	return parseTexts(texts)
}()

// AnswerLocation says where the JSON object of an answer is.
type AnswerLocation struct {
	// Object is the object's JSON text when exactly one candidate was found and it
	// parses as a strict JSON object; "" otherwise.
	Object string
	// Objects counts the candidates: fenced blocks (info string empty or json) when
	// the answer has any, else the top-level JSON objects in the text.
	Objects int
	// Err says why the one candidate is not a JSON object ("" when it is, or when
	// there is no single candidate).
	Err string
	// ExtraText reports non-blank text outside the candidate (or its fence).
	ExtraText bool
}

// LocateAnswer finds the JSON object of an answer that should be exactly one object,
// possibly in one fenced block (``` or ```json, three or more backticks; a fence
// never closed runs to the end of the text). Without a fence, the candidates are the
// top-level balanced {...} groups (a scanner that tracks strings and escapes) that
// are valid JSON; when none is, the first group is the candidate and Err says why it
// does not parse. A byte order mark is ignored.
func LocateAnswer(content string) AnswerLocation {
	content = strings.TrimPrefix(content, "\uFEFF")
	var loc AnswerLocation
	if fences := jsonFences(content); len(fences) > 0 {
		loc.Objects = len(fences)
		if len(fences) > 1 {
			return loc
		}
		f := fences[0]
		loc.ExtraText = strings.TrimSpace(content[:f.start]) != "" || strings.TrimSpace(content[f.end:]) != ""
		loc.Object, loc.Err = strictObject(strings.TrimSpace(content[f.bodyStart:f.bodyEnd]))
		return loc
	}
	groups := braceGroups(content)
	if len(groups) == 0 {
		return loc
	}
	var valid [][2]int
	for _, g := range groups {
		if rawjson.ValidString(content[g[0]:g[1]], rawjson.DefaultMaxDepth) {
			valid = append(valid, g)
		}
	}
	switch len(valid) {
	case 0:
		g := groups[0]
		loc.Objects = 1
		loc.ExtraText = strings.TrimSpace(content[:g[0]]) != "" || strings.TrimSpace(content[g[1]:]) != ""
		loc.Object, loc.Err = strictObject(content[g[0]:g[1]])
	case 1:
		g := valid[0]
		loc.Objects = 1
		loc.ExtraText = strings.TrimSpace(content[:g[0]]) != "" || strings.TrimSpace(content[g[1]:]) != ""
		loc.Object = content[g[0]:g[1]]
	default:
		loc.Objects = len(valid)
	}
	return loc
}

// AnswerObject returns the JSON object of an answer (see LocateAnswer) and whether
// there is exactly one that parses.
func AnswerObject(content string) (string, bool) {
	loc := LocateAnswer(content)
	return loc.Object, loc.Object != ""
}

// strictObject returns text when it is a strict JSON object, else why not.
func strictObject(text string) (string, string) {
	switch {
	case text == "":
		return "", "the block is empty"
	case !rawjson.ValidString(text, rawjson.DefaultMaxDepth):
		return "", "it does not parse as JSON"
	case !gjson.Parse(text).IsObject():
		return "", "it is a JSON " + jsonTypeName(gjson.Parse(text)) + ", not an object"
	}
	return text, ""
}

// fence is one fenced code block: [start, end) is the whole block, [bodyStart,
// bodyEnd) the lines between the fences.
type fence struct {
	start, end         int
	bodyStart, bodyEnd int
}

// jsonFences returns the fenced blocks of text whose info string is empty or "json"
// (any case). An opening fence is a line of three or more backticks, indented by at
// most three spaces; the closing fence is a line of at least as many backticks and
// nothing else; a fence never closed runs to the end of the text.
func jsonFences(text string) []fence {
	var out []fence
	pos := 0
	for pos < len(text) {
		lineEnd := lineEndAt(text, pos)
		line := text[pos:lineEnd]
		n, info, ok := openingFence(line)
		if !ok {
			pos = nextLine(text, lineEnd)
			continue
		}
		f := fence{start: pos, bodyStart: nextLine(text, lineEnd), end: len(text), bodyEnd: len(text)}
		for p := f.bodyStart; p < len(text); {
			e := lineEndAt(text, p)
			if closingFence(text[p:e], n) {
				f.bodyEnd, f.end = p, e
				break
			}
			p = nextLine(text, e)
		}
		if f.bodyStart > len(text) {
			f.bodyStart = len(text)
		}
		if f.bodyEnd < f.bodyStart {
			f.bodyEnd = f.bodyStart
		}
		if info == "" || strings.EqualFold(info, "json") {
			out = append(out, f)
		}
		pos = nextLine(text, f.end)
	}
	return out
}

func lineEndAt(text string, pos int) int {
	if i := strings.IndexByte(text[pos:], '\n'); i >= 0 {
		return pos + i
	}
	return len(text)
}

func nextLine(text string, lineEnd int) int {
	if lineEnd < len(text) {
		return lineEnd + 1
	}
	return len(text)
}

// openingFence reads "```json" (up to three spaces of indentation): the number of
// backticks and the info string's first word.
func openingFence(line string) (int, string, bool) {
	line = strings.TrimRight(line, "\r")
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return 0, "", false
	}
	n := 0
	for n < len(trimmed) && trimmed[n] == '`' {
		n++
	}
	if n < 3 {
		return 0, "", false
	}
	info := strings.TrimSpace(trimmed[n:])
	if strings.IndexByte(info, '`') >= 0 {
		return 0, "", false
	}
	if i := strings.IndexAny(info, " \t"); i >= 0 {
		info = info[:i]
	}
	return n, info, true
}

// closingFence reports a line of at least n backticks and nothing else but spaces.
func closingFence(line string, n int) bool {
	t := strings.TrimSpace(line)
	if len(t) < n {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] != '`' {
			return false
		}
	}
	return true
}

// braceGroups returns the top-level balanced {...} groups of text, as [start, end)
// byte ranges, tracking JSON strings and escapes so that braces inside strings do
// not count. An unbalanced group runs to the end of the text.
func braceGroups(text string) [][2]int {
	var out [][2]int
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		start, depth, inString := i, 0, false
		for ; i < len(text); i++ {
			c := text[i]
			if inString {
				switch c {
				case '\\':
					i++
				case '"':
					inString = false
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth == 0 {
				break
			}
		}
		end := min(i+1, len(text))
		out = append(out, [2]int{start, end})
		i = end - 1
	}
	return out
}

var _ interceptors.AnswerValidator = (*ShapeValidator)(nil)
