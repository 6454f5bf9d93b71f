package knowledge

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// builtinFS holds the built-in packs (a built-in pack's labelled evaluation set is
// its eval folder; its example cases, its cases folder). The generator's inputs under packs/*/gen are not embedded.
//
//go:embed packs/*/pack.yaml packs/*/*.md packs/*/*.tmpl packs/*/*.yaml packs/*/sets/*.json packs/*/eval/*.json
var builtinFS embed.FS

// BuiltinPackNames are the packs embedded in the binary, in load order.
var BuiltinPackNames = []string{"ra3", "dnd", "orders"}

// Registry holds loaded packs and resolves knowledge sets by name. Set names are
// global across the packs of a registry. A Registry is immutable and safe for
// concurrent use; the packs and sets it returns are shared and must not be modified.
type Registry struct {
	packs map[string]*Pack
	names []string // pack names, sorted
	sets  map[string]*Pack
}

var builtin struct {
	once sync.Once
	reg  *Registry
	err  error
}

// Builtin returns the registry of the built-in packs, loaded from the embedded files
// once per process.
func Builtin() (*Registry, error) {
	builtin.once.Do(func() {
		packs, err := BuiltinPacks()
		if err != nil {
			builtin.err = err
			return
		}
		builtin.reg, builtin.err = NewRegistry(packs...)
	})
	return builtin.reg, builtin.err
}

// BuiltinPacks loads fresh copies of the built-in packs from the embedded files.
func BuiltinPacks() ([]*Pack, error) {
	var packs []*Pack
	for _, name := range BuiltinPackNames {
		p, err := loadPack(builtinFS, "packs/"+name, "embedded:"+name)
		if err != nil {
			return nil, fmt.Errorf("built-in pack %s: %w", name, err)
		}
		packs = append(packs, p)
	}
	return packs, nil
}

// LoadPacks loads the user packs in dir: every subfolder with a pack.yaml is a pack
// (folders whose names start with "." or "_" are skipped; any other subfolder
// without a pack.yaml is an error, so a misplaced pack is not silently ignored).
// Packs come back in folder name order.
func LoadPacks(dir string) ([]*Pack, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading pack directory: %w", err)
	}
	var packs []*Pack
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		p, err := LoadPackDir(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		packs = append(packs, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return packs, nil
}

// LoadRegistry returns the built-in packs plus the user packs in dir (none when dir
// is empty); a user pack with a built-in pack's name replaces it.
func LoadRegistry(dir string) (*Registry, error) {
	packs, err := BuiltinPacks()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		user, err := LoadPacks(dir)
		if err != nil {
			return nil, err
		}
		packs = append(packs, user...)
	}
	return NewRegistry(packs...)
}

// NewRegistry makes a registry of packs; a later pack with the same name as an
// earlier one replaces it. Two different packs declaring the same set name is an
// error.
func NewRegistry(packs ...*Pack) (*Registry, error) {
	r := &Registry{packs: map[string]*Pack{}, sets: map[string]*Pack{}}
	for _, p := range packs {
		if p == nil {
			continue
		}
		r.packs[p.Name] = p
	}
	r.names = sortedKeys(r.packs)
	var errs []error
	for _, name := range r.names {
		p := r.packs[name]
		for _, set := range p.SetNames() {
			if other, dup := r.sets[set]; dup {
				errs = append(errs, fmt.Errorf("knowledge set %q is declared by two packs: %s (%s) and %s (%s)", set, other.Name, other.Dir, p.Name, p.Dir))
				continue
			}
			r.sets[set] = p
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// Pack returns the pack with that name, or nil.
func (r *Registry) Pack(name string) *Pack { return r.packs[name] }

// Packs returns the packs, sorted by name.
func (r *Registry) Packs() []*Pack {
	out := make([]*Pack, len(r.names))
	for i, n := range r.names {
		out[i] = r.packs[n]
	}
	return out
}

// Set returns the knowledge set with that name and the pack that declares it; nil,
// nil when no pack does.
func (r *Registry) Set(name string) (*Set, *Pack) {
	p := r.sets[name]
	if p == nil {
		return nil, nil
	}
	return p.Set(name), p
}

// SetNames returns every set name, sorted.
func (r *Registry) SetNames() []string {
	names := sortedKeys(r.sets)
	sort.Strings(names)
	return names
}
