package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/sjson"
)

// The required-fields test: every object and stream event factgate synthesizes
// (the scenarios of openai_scenarios_test.go, the schema test's) checked against
// the shape openai-go declares for it, with no spec file, so it always runs.
//
// openai-go is generated from the OpenAI spec and keeps what matters here in its
// struct tags: a member the API always sends is `api:"required"`, a member that
// may be null is `api:"nullable"`, a member's Go type gives its JSON kind, a
// constant type (shared/constant) its one value, and a union (a ...Union struct)
// lists its variants as As... methods, an object variant naming its "type". The
// check walks a JSON value with the Go type it stands for, following object
// members, array elements, map values and, in a union, the variant the value's
// "type" names (or, without one, the variants of its JSON kind, any that fits),
// and reports, by JSON path:
//
//   - a required member that is missing;
//   - a value whose JSON kind is not its Go type's (a string where int64 is
//     declared, a fraction in an integer, an array for a struct), or a constant
//     with another value;
//   - null in a member that is neither required nor nullable, except the
//     members of a Response in responseLiveNulls ("user", "usage"), which the
//     live API sends as null — the schema test's allowance too.
//
// A required member may be null: openai-go's tags do not say which required
// members the spec lets be null (Response.error, incomplete_details and
// instructions, a message's content and refusal, an error's code and param are
// required and null in the live API's answers), so the key being there is what
// this test checks; the schema test, where the spec is at hand, checks the
// nulls. Members openai-go does not know are not looked at.

// errorEnvelope is the spec's ErrorResponse: openai-go declares the error object
// (shared.ErrorObject), not the envelope that carries it.
type errorEnvelope struct {
	Error shared.ErrorObject `json:"error" api:"required"`
}

// openAIGoType is the openai-go type each kind of synthesized object is checked as.
var openAIGoType = map[synthesizedKind]reflect.Type{
	synthesizedResponse:      reflect.TypeFor[responses.Response](),
	synthesizedResponseEvent: reflect.TypeFor[responses.ResponseStreamEventUnion](),
	synthesizedChatChunk:     reflect.TypeFor[openai.ChatCompletionChunk](),
	synthesizedError:         reflect.TypeFor[errorEnvelope](),
}

// shapeFinding is one way a JSON value breaks the shape openai-go declares: where
// (a JSON path, "" for the value itself) and what.
type shapeFinding struct {
	path, problem string
}

func (f shapeFinding) String() string {
	if f.path == "" {
		return "the value: " + f.problem
	}
	return f.path + ": " + f.problem
}

// checkOpenAIGoShape reports how raw breaks the shape openai-go declares for t.
func checkOpenAIGoShape(t reflect.Type, raw []byte) []shapeFinding {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []shapeFinding{{"", "not JSON: " + err.Error()}}
	}
	var c shapeChecker
	c.value(t, v, "")
	return c.findings
}

// shapeChecker collects the findings of one walk.
type shapeChecker struct {
	findings []shapeFinding
}

func (c *shapeChecker) add(path, format string, args ...any) {
	c.findings = append(c.findings, shapeFinding{path, fmt.Sprintf(format, args...)})
}

// memberPath is the path of member name of the object at path.
func memberPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonKind names the JSON kind of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// value checks v, found at path, as Go type t.
func (c *shapeChecker) value(t reflect.Type, v any, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return // any JSON
	}
	if v == nil {
		c.add(path, "null where %s is declared", t)
		return
	}
	if want, ok := openAIConstant(t); ok {
		if v != want {
			c.add(path, "%s %v where %s is always %q", jsonKind(v), v, t, want)
		}
		return
	}
	if !kindFits(t, v) {
		c.add(path, "a JSON %s where %s (%s) is declared", jsonKind(v), t, t.Kind())
		return
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if f, err := v.(json.Number).Float64(); err != nil || f != math.Trunc(f) {
			c.add(path, "%v where the integer %s is declared", v, t)
		}
	case reflect.Slice, reflect.Array:
		for i, e := range v.([]any) {
			c.value(t.Elem(), e, fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		obj := v.(map[string]any)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			c.value(t.Elem(), obj[k], memberPath(path, k))
		}
	case reflect.Struct:
		if variants := unionVariants(t); variants != nil {
			c.union(t, variants, v, path)
			return
		}
		c.object(t, v.(map[string]any), path)
	}
}

// object checks the members of an object declared as struct t.
func (c *shapeChecker) object(t reflect.Type, obj map[string]any, path string) {
	// Visible fields: an embedded struct's members are the object's own.
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || name == "" || name == "-" {
			continue
		}
		api := strings.Split(f.Tag.Get("api"), ",")
		required, nullable := slices.Contains(api, "required"), slices.Contains(api, "nullable")
		p := memberPath(path, name)
		v, ok := obj[name]
		switch {
		case !ok:
			if required {
				c.add(p, "missing: %s.%s is required", t, f.Name)
			}
		case v == nil:
			if !required && !nullable && !liveNull(t, name) {
				c.add(p, "null: %s.%s (%s) is neither required nor nullable", t, f.Name, f.Type)
			}
		default:
			c.value(f.Type, v, p)
		}
	}
}

// liveNull says whether member name of struct t is one the live API sends as null
// where openai-go does not allow it: responseLiveNulls of a Response.
func liveNull(t reflect.Type, name string) bool {
	return t == reflect.TypeFor[responses.Response]() && slices.Contains(responseLiveNulls[:], name)
}

// union checks v as one of a union's variants: the one its "type" names, else
// any of its JSON kind that v fits. When none fits, the findings of the closest
// are reported.
func (c *shapeChecker) union(t reflect.Type, variants []reflect.Type, v any, path string) {
	var fit []reflect.Type
	for _, vt := range variants {
		if kindFits(vt, v) {
			fit = append(fit, vt)
		}
	}
	// An object's "type" picks the variant whose constant it is; a type no
	// variant names leaves the variants whose type is an enum (openai-go keeps
	// no list of its values), and the object is of one only if it fits it.
	typ, unknownType := "", false
	if obj, ok := v.(map[string]any); ok {
		if s, ok := obj["type"].(string); ok {
			var named, unnamed []reflect.Type
			for _, vt := range fit {
				if d, ok := discriminator(vt); !ok {
					unnamed = append(unnamed, vt)
				} else if d == s {
					named = append(named, vt)
				}
			}
			fit, typ, unknownType = named, s, len(named) == 0
			if unknownType {
				fit = unnamed
			}
		}
	}
	var closest []shapeFinding
	for i, vt := range fit {
		var sub shapeChecker
		sub.value(vt, v, path)
		if len(sub.findings) == 0 {
			return
		}
		if i == 0 || len(sub.findings) < len(closest) {
			closest = sub.findings
		}
	}
	switch {
	case unknownType && len(closest) > 0:
		c.add(memberPath(path, "type"), "%q is the type of none of %s's variants (the closest of those without a constant type: %v)", typ, t, closest)
	case unknownType:
		c.add(memberPath(path, "type"), "%q is the type of none of %s's variants", typ, t)
	case len(fit) == 0:
		c.add(path, "a JSON %s, which none of %s's variants is", jsonKind(v), t)
	default:
		c.findings = append(c.findings, closest...)
	}
}

// unionVariants are the variants of an openai-go union (a struct named ...Union):
// the types its As... methods return. Nil for any other type.
func unionVariants(t reflect.Type) []reflect.Type {
	if t.Kind() != reflect.Struct || !strings.HasSuffix(t.Name(), "Union") {
		return nil
	}
	var out []reflect.Type
	for i := range t.NumMethod() {
		m := t.Method(i)
		if strings.HasPrefix(m.Name, "As") && m.Name != "AsAny" && m.Type.NumIn() == 1 && m.Type.NumOut() == 1 {
			out = append(out, m.Type.Out(0))
		}
	}
	return out
}

// discriminator is the "type" an object variant always has: the value of its
// "type" member's constant type.
func discriminator(t reflect.Type) (string, bool) {
	if t.Kind() != reflect.Struct {
		return "", false
	}
	for _, f := range reflect.VisibleFields(t) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "type" && !f.Anonymous {
			return openAIConstant(f.Type)
		}
	}
	return "", false
}

// openAIConstant is the one value of a constant type of openai-go
// (shared/constant: a string type whose Default method returns it).
func openAIConstant(t reflect.Type) (string, bool) {
	if t.Kind() != reflect.String || !strings.HasSuffix(t.PkgPath(), "/shared/constant") {
		return "", false
	}
	m := reflect.Zero(t).MethodByName("Default")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
		return "", false
	}
	return m.Call(nil)[0].String(), true
}

// kindFits says whether v's JSON kind is one Go type t reads; a constant fits
// only its own value, a union any kind one of its variants fits.
func kindFits(t reflect.Type, v any) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return true
	}
	if want, ok := openAIConstant(t); ok {
		return v == want
	}
	switch t.Kind() {
	case reflect.String:
		_, ok := v.(string)
		return ok
	case reflect.Bool:
		_, ok := v.(bool)
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		_, ok := v.(json.Number)
		return ok
	case reflect.Slice, reflect.Array:
		_, ok := v.([]any)
		return ok
	case reflect.Map:
		_, ok := v.(map[string]any)
		return ok
	case reflect.Struct:
		if variants := unionVariants(t); variants != nil {
			return slices.ContainsFunc(variants, func(vt reflect.Type) bool { return kindFits(vt, v) })
		}
		_, ok := v.(map[string]any)
		return ok
	}
	return false
}

// TestSynthesizedObjectsHaveOpenAIGoRequiredFields checks every object and
// stream event eachSynthesized makes factgate build against the type openai-go
// declares for it: every required member there, every value of its declared
// kind, null only where allowed.
func TestSynthesizedObjectsHaveOpenAIGoRequiredFields(t *testing.T) {
	t.Parallel()
	checked := map[synthesizedKind]int{}
	eachSynthesized(t, func(s synthesized) {
		typ := openAIGoType[s.kind]
		if typ == nil {
			t.Fatalf("%s: no openai-go type for kind %d", s.what, s.kind)
		}
		checked[s.kind]++
		for _, f := range checkOpenAIGoShape(typ, s.raw) {
			t.Errorf("%s, read as %s: %s\n%s", s.what, typ, f, s.raw)
		}
	})
	for kind := range openAIGoType {
		if checked[kind] == 0 {
			t.Errorf("no object of kind %d (%s) was checked", kind, openAIGoType[kind])
		}
	}
	t.Logf("checked: %d responses, %d Responses stream events, %d chat chunks, %d error envelopes",
		checked[synthesizedResponse], checked[synthesizedResponseEvent], checked[synthesizedChatChunk], checked[synthesizedError])
}

// TestRequiredFieldsCheckReportsWhatIsWrong proves the check can fail: objects
// made wrong in one place, among them the two breaks issue 33 found (a function
// tool echoed without strict, input_tokens_details without
// cache_write_tokens), are each reported at exactly that path, and the same
// objects unbroken (and with the live API's nulls) at none.
func TestRequiredFieldsCheckReportsWhatIsWrong(t *testing.T) {
	t.Parallel()
	chat := `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"It is sunny.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	request := `{"model":"m","input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`
	response := string(chatToResponse([]byte(chat), []byte(request), []byte(`{}`)))
	created := `{"type":"response.created","sequence_number":0,"response":` + response + `}`
	delta := `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"It","logprobs":[]}`
	chunk := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"It"},"finish_reason":null}]}`
	envelope := `{"error":{"message":"no route serves the model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`

	set := func(raw, path string, v any) string {
		out, err := sjson.Set(raw, path, v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	del := func(raw, path string) string {
		out, err := sjson.Delete(raw, path)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cases := []struct {
		name string
		kind synthesizedKind
		raw  string
		want []string // the paths reported
	}{
		{"a good response", synthesizedResponse, response, nil},
		{"the live API's nulls", synthesizedResponse, set(set(response, "user", nil), "usage", nil), nil},
		{"a required member null", synthesizedResponse, set(response, "tools.0.strict", nil), nil},
		{"a function tool without strict", synthesizedResponse, del(response, "tools.0.strict"), []string{"tools[0].strict"}},
		{"input_tokens_details without cache_write_tokens", synthesizedResponse, del(response, "usage.input_tokens_details.cache_write_tokens"), []string{"usage.input_tokens_details.cache_write_tokens"}},
		{"a function call without call_id", synthesizedResponse, del(response, "output.1.call_id"), []string{"output[1].call_id"}},
		{"a token count as a string", synthesizedResponse, set(response, "usage.output_tokens", "5"), []string{"usage.output_tokens"}},
		{"a token count with a fraction", synthesizedResponse, set(response, "usage.output_tokens", 5.5), []string{"usage.output_tokens"}},
		{"a status null", synthesizedResponse, set(response, "status", nil), []string{"status"}},
		{"an output item of no known type", synthesizedResponse, set(response, "output.0.type", "messages"), []string{"output[0].type"}},
		{"the wrong object constant", synthesizedResponse, set(response, "object", "chat.completion"), []string{"object"}},
		{"a good response.created", synthesizedResponseEvent, created, nil},
		{"response.created whose response lacks tools", synthesizedResponseEvent, del(created, "response.tools"), []string{"response.tools"}},
		{"a good output_text.delta", synthesizedResponseEvent, delta, nil},
		{"an output_text.delta without item_id", synthesizedResponseEvent, del(delta, "item_id"), []string{"item_id"}},
		{"a good chat chunk", synthesizedChatChunk, chunk, nil},
		{"a chat chunk's choice without index", synthesizedChatChunk, del(chunk, "choices.0.index"), []string{"choices[0].index"}},
		{"a good error envelope", synthesizedError, envelope, nil},
		{"an error without param", synthesizedError, del(envelope, "error.param"), []string{"error.param"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			findings := checkOpenAIGoShape(openAIGoType[tc.kind], []byte(tc.raw))
			var got []string
			for _, f := range findings {
				got = append(got, f.path)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("reported %q, want %q:\n%v\n%s", got, tc.want, findings, tc.raw)
			}
		})
	}
}
