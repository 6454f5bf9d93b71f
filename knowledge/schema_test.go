package knowledge

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

const schemaPath = "../configs/knowledge.schema.json"

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	return schema
}

// The schema and the loader agree on the taxonomy and the entry fields.
func TestSchemaMatchesTheLoader(t *testing.T) {
	t.Parallel()
	schema := loadSchema(t)
	defs := schema["$defs"].(map[string]any)
	var enum []string
	for _, v := range defs["builtinTag"].(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	if !slices.Equal(enum, BuiltinTags()) {
		t.Errorf("schema builtinTag enum = %v, want BuiltinTags() %v", enum, BuiltinTags())
	}
	var props []string
	for k := range defs["entry"].(map[string]any)["properties"].(map[string]any) {
		props = append(props, k)
	}
	sort.Strings(props)
	want := slices.Clone(entryFields)
	sort.Strings(want)
	if !slices.Equal(props, want) {
		t.Errorf("schema entry properties = %v, the loader accepts %v", props, want)
	}
	if schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", schema["$schema"])
	}
}

// Every built-in set file validates against the schema, and files the schema
// rejects are rejected by the loader too.
func TestBuiltinSetsValidateAgainstTheSchema(t *testing.T) {
	t.Parallel()
	schema := loadSchema(t)
	v := &schemaValidator{root: schema}
	files, err := fs.Glob(builtinFS, "packs/*/sets/*.json")
	if err != nil || len(files) < 3 {
		t.Fatalf("built-in set files: %v %v", files, err)
	}
	for _, f := range files {
		b, _ := fs.ReadFile(builtinFS, f)
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		if errs := v.validate(schema, doc, "$"); len(errs) > 0 {
			t.Errorf("%s does not validate:\n%s", f, strings.Join(errs, "\n"))
		}
	}
	overlay := map[string]any{}
	if err := json.Unmarshal([]byte(testOverlay), &overlay); err != nil {
		t.Fatal(err)
	}
	if errs := v.validate(schema, overlay, "$"); len(errs) > 0 {
		t.Errorf("the test overlay does not validate:\n%s", strings.Join(errs, "\n"))
	}
	bad := []string{
		`{"global": {"entries": [{"id": "a", "tags": ["rule"]}]}}`,
		`{"global": {"entries": [{"id": "a", "tags": "rule", "text": "x"}]}}`,
		`{"global": {"entries": [{"id": "a", "tags": ["rule"], "text": "x", "note": "y"}]}}`,
		`{"global": {"entries": [{"id": "a", "tags": ["two words"], "text": "x"}]}}`,
		`{"global": {"entries": [{"id": "a", "text": "x", "asset": "p"}]}}`,
		`{"factions": {"盟军": {"entries": [], "notes": 1}}}`,
		`{"factions": []}`,
		`{"taxonomy": {"tags": ["specialPower:X"]}}`,
	}
	for _, doc := range bad {
		var d any
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if len(v.validate(schema, d, "$")) == 0 {
			t.Errorf("the schema accepts %s", doc)
		}
		if _, err := LoadSet("bad", []byte(doc), "bad.json", nil); err == nil {
			t.Errorf("the loader accepts %s", doc)
		}
	}
}

// schemaValidator implements the JSON Schema keywords configs/knowledge.schema.json
// uses; an unknown keyword fails the test, so the schema cannot outgrow the check.
type schemaValidator struct{ root map[string]any }

var annotationKeywords = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true, "$defs": true}

func (v *schemaValidator) validate(s map[string]any, doc any, at string) []string {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	for kw, val := range s {
		switch kw {
		case "$ref":
			name := strings.TrimPrefix(val.(string), "#/$defs/")
			errs = append(errs, v.validate(v.root["$defs"].(map[string]any)[name].(map[string]any), doc, at)...)
		case "type":
			if !jsonTypeIs(doc, val.(string)) {
				fail("want type %s", val)
			}
		case "enum":
			if !slices.ContainsFunc(val.([]any), func(e any) bool { return reflect.DeepEqual(e, doc) }) {
				fail("%v not in enum", doc)
			}
		case "const":
			if !reflect.DeepEqual(val, doc) {
				fail("want %v", val)
			}
		case "pattern":
			if str, ok := doc.(string); ok && !regexp.MustCompile(val.(string)).MatchString(str) {
				fail("%q does not match %s", str, val)
			}
		case "minLength":
			if str, ok := doc.(string); ok && len([]rune(str)) < int(val.(float64)) {
				fail("too short")
			}
		case "required":
			if obj, ok := doc.(map[string]any); ok {
				for _, r := range val.([]any) {
					if _, has := obj[r.(string)]; !has {
						fail("missing %s", r)
					}
				}
			}
		case "properties":
			if obj, ok := doc.(map[string]any); ok {
				for k, sub := range val.(map[string]any) {
					if child, has := obj[k]; has {
						errs = append(errs, v.validate(sub.(map[string]any), child, at+"."+k)...)
					}
				}
			}
		case "additionalProperties":
			obj, ok := doc.(map[string]any)
			if !ok {
				continue
			}
			props, _ := s["properties"].(map[string]any)
			for k, child := range obj {
				if _, declared := props[k]; declared {
					continue
				}
				if sub, isSchema := val.(map[string]any); isSchema {
					errs = append(errs, v.validate(sub, child, at+"."+k)...)
				} else if val == false {
					fail("unknown property %q", k)
				}
			}
		case "propertyNames":
			if obj, ok := doc.(map[string]any); ok {
				for k := range obj {
					errs = append(errs, v.validate(val.(map[string]any), k, at+"{key}")...)
				}
			}
		case "items":
			if arr, ok := doc.([]any); ok {
				for i, it := range arr {
					errs = append(errs, v.validate(val.(map[string]any), it, fmt.Sprintf("%s[%d]", at, i))...)
				}
			}
		case "uniqueItems":
			if arr, ok := doc.([]any); ok && val.(bool) {
				for i := range arr {
					for j := 0; j < i; j++ {
						if reflect.DeepEqual(arr[i], arr[j]) {
							fail("duplicate item %v", arr[i])
						}
					}
				}
			}
		case "anyOf":
			ok := false
			for _, sub := range val.([]any) {
				if len(v.validate(sub.(map[string]any), doc, at)) == 0 {
					ok = true
					break
				}
			}
			if !ok {
				fail("matches none of anyOf")
			}
		case "not":
			if len(v.validate(val.(map[string]any), doc, at)) == 0 {
				fail("matches a forbidden schema")
			}
		default:
			if !annotationKeywords[kw] {
				panic("schema keyword the test validator does not implement: " + kw)
			}
		}
	}
	return errs
}

func jsonTypeIs(doc any, typ string) bool {
	switch typ {
	case "object":
		_, ok := doc.(map[string]any)
		return ok
	case "array":
		_, ok := doc.([]any)
		return ok
	case "string":
		_, ok := doc.(string)
		return ok
	case "boolean":
		_, ok := doc.(bool)
		return ok
	}
	panic("type " + typ)
}
