package proxy

import (
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/configs/strictyaml"
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
// has the block (without one, v is left as it is). An error names the block's
// keys by their path from the stage ("semantic.validators").
func (rc *RouteConfig) DecodeBlock(stage string, v any) (bool, error) {
	return rc.decodeBlockAt("", stage, stage, v)
}

// decodeBlockAt is DecodeBlock with the block's place for the errors: file and
// its YAML path ("routes[0] (ra3-analyst).revise").
func (rc *RouteConfig) decodeBlockAt(file, path, stage string, v any) (bool, error) {
	n := rc.block(stage)
	if n == nil {
		return false, nil
	}
	return true, strictyaml.DecodeNode(n, file, path, v)
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

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
