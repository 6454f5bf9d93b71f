// Package strictyaml decodes user YAML (configs, mock scripts, packs) strictly and
// says what is wrong in the file's own terms: an unknown key or a bad value is
// named by its YAML path (server.listn, routes[0] (ra3-analyst).revise.treshold),
// its file and line, and for a key the nearest key that would be valid — never by
// the Go type it would have filled.
package strictyaml

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrEmpty is returned by Decode for a document with nothing in it (only
// comments, or no bytes); v is left as it was. Callers that take an empty file
// as empty check it with errors.Is.
var ErrEmpty = errors.New("empty document")

// Problem is one thing wrong in a YAML document.
type Problem struct {
	// Line is the 1-based line of the key or value at fault; 0 when unknown.
	Line int
	// Path is the YAML path of the key or value ("server.listn",
	// "routes[0] (ra3-analyst).revise.treshold"); "" for the document itself.
	Path string
	// Message says what is wrong ("unknown key (did you mean listen?)").
	Message string
}

// Error is every problem found in one document (or one block of it). It renders
// one problem a line: "file:line: path: message".
type Error struct {
	// File names the document ("configs/factgate.yaml"); "" when it has none.
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch {
		case e.File != "" && p.Line > 0:
			fmt.Fprintf(&b, "%s:%d: ", e.File, p.Line)
		case e.File != "":
			fmt.Fprintf(&b, "%s: ", e.File)
		case p.Line > 0:
			fmt.Fprintf(&b, "line %d: ", p.Line)
		}
		if p.Path != "" {
			b.WriteString(p.Path)
			b.WriteString(": ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}

// Decode decodes the first YAML document of data into v, a pointer, strictly: a
// key that names no field of the struct it would fill is an error, and so is a
// value of the wrong type. file names the document in the error. The error is an
// *Error listing every unknown key and bad value found, or ErrEmpty.
func Decode(data []byte, file string, v any) error {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return ErrEmpty
		}
		return &Error{File: file, Problems: []Problem{syntaxProblem(err)}}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return ErrEmpty
		}
		root = root.Content[0]
	}
	return DecodeNode(root, file, "", v)
}

// DecodeNode decodes node into v, a pointer, as Decode does; path is the YAML
// path of node in its document ("routes[0] (ra3-analyst).revise"), so that the
// problems name their full path.
func DecodeNode(node *yaml.Node, file, path string, v any) error {
	w := walk{seen: map[aliasVisit]bool{}, lines: map[int][]placed{}}
	w.check(node, reflect.TypeOf(v), path)
	problems := w.problems
	flagged := map[int]bool{}
	for _, p := range problems {
		flagged[p.Line] = true
	}
	if err := node.Decode(v); err != nil {
		var te *yaml.TypeError
		msgs := []string{err.Error()}
		if errors.As(err, &te) {
			msgs = te.Errors
		}
		for _, m := range msgs {
			p := w.decodeProblem(m, path)
			// A custom decoder repeating an unknown key the walk named already.
			if p.Line > 0 && flagged[p.Line] && strings.Contains(p.Message, "unknown key") {
				continue
			}
			problems = append(problems, p)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
	return &Error{File: file, Problems: problems}
}

// UnknownKey is the problem of a key that is none of known: it names the nearest
// known key, or lists them when none is near. Custom decoders that check their
// own keys use it to speak as Decode does.
func UnknownKey(line int, path string, known []string) Problem {
	return Problem{Line: line, Path: path, Message: unknownKeyMessage(lastKey(path), known)}
}

func unknownKeyMessage(key string, known []string) string {
	if near := Nearest(key, known); near != "" {
		return fmt.Sprintf("unknown key (did you mean %s?)", near)
	}
	if len(known) == 0 {
		return "unknown key (no keys are taken here)"
	}
	return fmt.Sprintf("unknown key (known keys: %s)", strings.Join(known, ", "))
}

// lastKey is the last key of a path ("treshold" of "routes[0] (r).revise.treshold").
func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// Join appends key to the YAML path p.
func Join(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

var (
	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

type aliasVisit struct {
	anchor *yaml.Node
	t      reflect.Type
}

// walk collects the unknown keys of a document and the YAML path of each line.
type walk struct {
	problems []Problem
	// seen are the anchors already walked for a type: an alias is walked once per
	// type, so that a document full of aliases costs no more than its nodes.
	seen map[aliasVisit]bool
	// lines maps a line to the nodes on it with their paths, outermost first, for
	// the errors yaml reports by line only.
	lines map[int][]placed
}

// placed is a node with its path.
type placed struct {
	path string
	node *yaml.Node
}

func (w *walk) note(n *yaml.Node, path string) {
	if n.Line > 0 {
		w.lines[n.Line] = append(w.lines[n.Line], placed{path, n})
	}
}

// pathAt is the path of the value at fault on line: the innermost scalar whose
// text is value when the error quotes it, else the innermost node there.
func (w *walk) pathAt(line int, value string) (string, bool) {
	on := w.lines[line]
	if len(on) == 0 {
		return "", false
	}
	if value != "" {
		for i := len(on) - 1; i >= 0; i-- {
			if on[i].node.Kind == yaml.ScalarNode && on[i].node.Value == value {
				return on[i].path, true
			}
		}
	}
	return on[len(on)-1].path, true
}

// check walks n as yaml decodes it into t, noting an unknown key under every
// mapping that fills a struct. A type that decodes itself (yaml.Unmarshaler,
// encoding.TextUnmarshaler) takes any keys, except a struct decoding itself from
// a mapping, which takes its own fields (its decoder reads them as a plain struct).
// An interface takes any keys.
func (w *walk) check(n *yaml.Node, t reflect.Type, path string) {
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
	if n.Anchor != "" {
		// Walked here; its aliases are the same keys.
		v := aliasVisit{n, t}
		if w.seen[v] {
			return
		}
		w.seen[v] = true
	}
	w.note(n, path)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if pt := reflect.PointerTo(t); pt.Implements(yamlUnmarshaler) || pt.Implements(textUnmarshaler) {
		if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
			return
		}
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
						w.check(m, t, path)
					}
				} else {
					w.check(v, t, path)
				}
				continue
			}
			kp := Join(path, k.Value)
			w.note(k, kp)
			ft, ok := fields[k.Value]
			if !ok {
				if !open {
					w.problems = append(w.problems, Problem{Line: k.Line, Path: kp, Message: unknownKeyMessage(k.Value, sortedKeys(t))})
				}
				continue
			}
			w.check(v, ft, kp)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				w.check(c, t.Elem(), path+itemLabel(i, c))
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				kp := Join(path, n.Content[i].Value)
				w.note(n.Content[i], kp)
				w.check(n.Content[i+1], t.Elem(), kp)
			}
		}
	}
}

// itemLabel is a list item's part of a path: "[2]", or "[2] (name)" for an item
// with a name, as factgate names routes and keys elsewhere.
func itemLabel(i int, n *yaml.Node) string {
	n = resolveAlias(n)
	if n.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "name" && n.Content[j+1].Kind == yaml.ScalarNode && n.Content[j+1].Value != "" {
				return fmt.Sprintf("[%d] (%s)", i, n.Content[j+1].Value)
			}
		}
	}
	return fmt.Sprintf("[%d]", i)
}

var (
	lineMessage  = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	cannotDecode = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// decodeProblem turns one of yaml's decode errors ("line 7: cannot unmarshal
// !!str `abc` into int") into a problem at the path of its line, with the wanted
// type said in YAML's words.
func (w *walk) decodeProblem(msg, path string) Problem {
	m := lineMessage.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Path: path, Message: strings.TrimPrefix(msg, "yaml: ")}
	}
	line, _ := strconv.Atoi(m[1])
	p := Problem{Line: line, Path: path, Message: m[2]}
	c := cannotDecode.FindStringSubmatch(m[2])
	value := ""
	if c != nil {
		value = c[2]
	}
	if lp, ok := w.pathAt(line, value); ok {
		p.Path = lp
	}
	if c != nil {
		got := yamlKindWord(c[1])
		if c[2] != "" {
			got = "`" + c[2] + "`"
		}
		p.Message = fmt.Sprintf("want %s, got %s", goTypeWord(c[3]), got)
	}
	return p
}

func yamlKindWord(tag string) string {
	switch tag {
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	case "!!null":
		return "null"
	}
	return "a " + strings.TrimPrefix(tag, "!!")
}

// goTypeWord names a Go type as what a YAML author writes for it.
func goTypeWord(t string) string {
	switch {
	case t == "time.Duration":
		return "a duration (500ms, 30s, 2m)"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.Contains(t, "."):
		return "a mapping" // a struct of the config
	}
	return "a value of another type"
}

func syntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := lineMessage.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return Problem{Line: line, Message: m[2]}
	}
	return Problem{Message: msg}
}

// yamlFields maps the keys of struct t to their fields' types as yaml names them:
// the tag's name, else the field's name in lower case; the keys of an ",inline"
// struct are t's own, and an ",inline" map makes t take any key (open).
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

// sortedKeys are the keys struct t takes, in declaration order.
func sortedKeys(t reflect.Type) []string {
	var keys []string
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
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
				if ft.Kind() == reflect.Struct {
					add(ft)
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			keys = append(keys, name)
		}
	}
	add(t)
	return keys
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// Nearest returns the entry of known closest to key when it is close enough to
// be the key meant: a typo (an edit or two, a swapped pair), or one name inside
// the other ("access_log" for "access"); "" when none is.
func Nearest(key string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	if bestD <= max(1, len(key)/3) {
		return best
	}
	// One name inside the other, or a long common start ("retries", "retry"):
	// the longest such known key.
	related := ""
	lk := strings.ToLower(key)
	for _, k := range known {
		lkk := strings.ToLower(k)
		near := min(len(k), len(key)) >= 3 && (strings.Contains(lk, lkk) || strings.Contains(lkk, lk))
		near = near || commonPrefix(lk, lkk) >= max(4, (len(lk)+1)/2)
		if near && len(k) > len(related) {
			related = k
		}
	}
	return related
}

// editDistance is the optimal string alignment distance of a and b: insertions,
// deletions, substitutions and transpositions of adjacent characters cost 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
