package proxy

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// block returns the route's block of the named stage; nil when the route has
// none or writes it as null ("inject:" with nothing after it), which is no
// block, as it was when every block had its own typed field.
func (rc *RouteConfig) block(stage string) *yaml.Node {
	n, ok := rc.Blocks[stage]
	if !ok {
		return nil
	}
	node := resolveAlias(&n)
	if node.Kind == yaml.ScalarNode && node.ShortTag() == "!!null" {
		return nil
	}
	return node
}

// HasBlock reports whether the route has the named stage's block.
func (rc *RouteConfig) HasBlock(stage string) bool { return rc.block(stage) != nil }

// DecodeBlock decodes the route's block of the named stage into v strictly, as
// the stage itself does when the chain is built, and reports whether the route
// has the block (without one, v is left as it is).
func (rc *RouteConfig) DecodeBlock(stage string, v any) (bool, error) {
	n := rc.block(stage)
	if n == nil {
		return false, nil
	}
	return true, decodeStrict(n, v)
}

// routeKeys are the keys a route's own fields take, in declaration order; every
// other key of a route is a stage block.
var routeKeys = func() []string {
	var keys []string
	t := reflect.TypeFor[RouteConfig]()
	for i := range t.NumField() {
		name, flags, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" && flags != "inline" {
			keys = append(keys, name)
		}
	}
	return keys
}()

// decodeStrict decodes node into v, a pointer, as a decoder with KnownFields
// does: a mapping key that names no field of the struct it fills is an error
// naming the key, its line and the type. (yaml.Node.Decode alone is never
// strict.)
func decodeStrict(node *yaml.Node, v any) error {
	w := fieldWalk{seen: map[aliasVisit]bool{}}
	w.unknownFields(node, reflect.TypeOf(v))
	msgs := w.msgs
	if err := node.Decode(v); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs = append(msgs, te.Errors...)
		} else {
			msgs = append(msgs, strings.TrimPrefix(err.Error(), "yaml: "))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// fieldWalk collects the unknown keys of a block.
type fieldWalk struct {
	msgs []string
	// seen are the anchors already walked for a type: an alias is walked once
	// per type, so that a block full of aliases costs no more than its nodes.
	seen map[aliasVisit]bool
}

type aliasVisit struct {
	anchor *yaml.Node
	t      reflect.Type
}

// unknownFields appends an error for every mapping key under n that names no
// field of the struct type it would fill, walking t as yaml.v3 decodes into it.
// A type that decodes itself (yaml.Unmarshaler, encoding.TextUnmarshaler) and an
// interface take any keys.
func (w *fieldWalk) unknownFields(n *yaml.Node, t reflect.Type) {
	if n.Kind == yaml.AliasNode {
		v := aliasVisit{resolveAlias(n), t}
		if w.seen[v] {
			return
		}
		w.seen[v] = true
		n = v.anchor
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = resolveAlias(n.Content[0])
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if pt := reflect.PointerTo(t); pt.Implements(yamlUnmarshaler) || pt.Implements(textUnmarshaler) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		fields, open := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
				if merged := resolveAlias(v); merged.Kind == yaml.SequenceNode {
					for _, m := range merged.Content {
						w.unknownFields(m, t)
					}
				} else {
					w.unknownFields(v, t)
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				if !open {
					w.msgs = append(w.msgs, fmt.Sprintf("line %d: field %s not found in type %s", k.Line, k.Value, t))
				}
				continue
			}
			w.unknownFields(v, ft)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				w.unknownFields(c, t.Elem())
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				w.unknownFields(n.Content[i], t.Elem())
			}
		}
	}
}

// yamlFields maps the keys of struct t to their fields' types as yaml.v3 names
// them: the tag's name, else the field's name in lower case; the keys of an
// ",inline" struct are t's own, and an ",inline" map makes t take any key
// (open).
func yamlFields(t reflect.Type) (fields map[string]reflect.Type, open bool) {
	fields = map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, flags, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(flags, ","), "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Map:
				open = true
			case reflect.Struct:
				sub, subOpen := yamlFields(ft)
				for k, v := range sub {
					fields[k] = v
				}
				open = open || subOpen
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, open
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
