package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/factgate/factgate/interceptors/inject"
	"github.com/factgate/factgate/knowledge"
)

func init() {
	register("knowledge lint", "check knowledge set, overlay and pack files (FILE... ; exit 1 on errors)", runKnowledgeLint)
	register("knowledge render", "print the system prompt factgate injects for a set and scopes (--set ra3-corona --factions 神州,盟军 --map ID)", runKnowledgeRender)
	register("knowledge export", "print a knowledge set as JSON, a starting point for an overlay (--set ra3)", runKnowledgeExport)
	register("knowledge list", "list the packs, their knowledge sets and scope values", runKnowledgeList)
}

// newKnowledgeFlags makes a subcommand's flag set; its usage text goes to stderr.
func newKnowledgeFlags(name, usage, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("factgate knowledge "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: factgate knowledge %s %s\n\n%s\n\nFlags:\n", name, usage, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; done reports that the command should exit with code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil:
		return 2, true
	}
	return 0, false
}

func runKnowledgeLint(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newKnowledgeFlags("lint", "[--set NAME] [--packs DIR] FILE...",
		`Checks each FILE and prints every problem with its place (file:line:column,
scope, entry id, field, offending value). A FILE is a pack.yaml (the whole pack:
manifest, sets, templates, rules), a knowledge set JSON (with the assets and
dimension order of the pack that declares it, when there is one), or — with --set —
a user overlay for that set. Prints "FILE: ok" for each good file. Exit status:
0 all good, 1 problems found, 2 usage error.`, stderr)
	setName := fs.String("set", "", "lint the JSON files as overlays of this knowledge set")
	packs := fs.String("packs", "", "folder of user packs to load besides the built-in ones")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var base *knowledge.Set
	if *setName != "" {
		reg, err := knowledge.LoadRegistry(*packs)
		if err != nil {
			fmt.Fprintf(stderr, "factgate knowledge lint: loading packs: %v\n", err)
			return 1
		}
		if base, _ = reg.Set(*setName); base == nil {
			fmt.Fprintf(stderr, "factgate knowledge lint: unknown knowledge set %q (known: %s)\n", *setName, strings.Join(reg.SetNames(), ", "))
			return 2
		}
	}
	failed := false
	for _, file := range fs.Args() {
		if err := lintFile(file, base); err != nil {
			failed = true
			printProblems(stderr, err)
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", file)
	}
	if failed {
		return 1
	}
	return 0
}

// printProblems prints one problem per line.
func printProblems(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(w, line)
	}
}

// lintFile checks one file: a pack manifest, an overlay of base, a set file,
// or a pack's example case (cases/*.yaml).
func lintFile(file string, base *knowledge.Set) error {
	if filepath.Base(file) == knowledge.PackFile {
		_, err := knowledge.LoadPackDir(filepath.Dir(file))
		return err
	}
	if filepath.Base(filepath.Dir(file)) == casesDir && filepath.Ext(file) == ".yaml" {
		_, err := loadCase(file)
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if base != nil {
		_, err := base.WithOverlay(data, file)
		return err
	}
	if dir, ok := declaringPack(file); ok {
		// Lint in context: the pack's assets and dimension order. The pack's other
		// files are checked too, since the set cannot load without them.
		_, err := knowledge.LoadPackDir(dir)
		return err
	}
	_, err = knowledge.LoadSet(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), data, file, nil)
	return err
}

// declaringPack finds the pack folder (the file's folder or its parent) whose
// pack.yaml declares file as a knowledge set or as its rules file.
func declaringPack(file string) (string, bool) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", false
	}
	for _, dir := range []string{filepath.Dir(file), filepath.Dir(filepath.Dir(file))} {
		manifest, err := knowledge.ReadPackManifest(filepath.Join(dir, knowledge.PackFile))
		if err != nil {
			continue
		}
		files := []string{}
		for _, spec := range manifest.Sets {
			files = append(files, spec.File)
		}
		if manifest.RulesFile != "" {
			files = append(files, manifest.RulesFile) // a rules file lints with its pack
		}
		for _, f := range files {
			if p, err := filepath.Abs(filepath.Join(dir, f)); err == nil && p == abs {
				return dir, true
			}
		}
	}
	return "", false
}

// scopeFlag collects repeated --scope dim=v1,v2 flags.
type scopeFlag []string

func (s *scopeFlag) String() string     { return strings.Join(*s, " ") }
func (s *scopeFlag) Set(v string) error { *s = append(*s, v); return nil }

func runKnowledgeRender(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newKnowledgeFlags("render", "[--set NAME] [--factions A,B] [--map ID] [--scope DIM=V1,V2]... [--replay FILE] [--overlay FILE] [--no-contract] [--rules TEXT | --rules-file FILE] [--custom-prompt-file FILE] [--knowledge-only]",
		`Prints exactly the system prompt factgate injects (a route's inject block):
the rendered knowledge — global entries, then each dimension in the set's order,
factions in the order given (player order), then maps; scope values the set does
not know are skipped — then the pack's contract (as on a route that validates;
--no-contract for one that does not), then the additional rules.

--replay reads the set and scopes from an operation log with the pack's header
rules, as the proxy does for a request; explicit flags override what it reads.
--knowledge-only prints the rendered knowledge alone.`, stderr)
	setName := fs.String("set", "", "knowledge set to render (ra3, ra3-corona, dnd...); default: from --replay, else the pack's default")
	factions := fs.String("factions", "", "comma-separated faction scope values in player order (same as --scope factions=...)")
	mapID := fs.String("map", "", "map scope value (same as --scope maps=...)")
	var scopes scopeFlag
	fs.Var(&scopes, "scope", "DIM=V1,V2: scope values of any dimension (repeatable)")
	replay := fs.String("replay", "", "read the set and scopes from this operation log's header lines")
	packName := fs.String("pack", "ra3", "pack whose header rules read --replay (when --set is not given)")
	overlay := fs.String("overlay", "", "apply this user overlay file before rendering")
	packs := fs.String("packs", "", "folder of user packs to load besides the built-in ones")
	noContract := fs.Bool("no-contract", false, "leave out the pack's contract (a route that does not validate, or contract: never)")
	rules := fs.String("rules", "", "additional rules, as the route's additional_rules")
	rulesFile := fs.String("rules-file", "", "read the additional rules from this file (additional_rules_file)")
	customFile := fs.String("custom-prompt-file", "", "replace the rendered knowledge with this file (use_custom_system_prompt)")
	knowledgeOnly := fs.Bool("knowledge-only", false, "print only the rendered knowledge")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "factgate knowledge render: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *rules != "" && *rulesFile != "" {
		fmt.Fprintln(stderr, "factgate knowledge render: --rules and --rules-file are exclusive")
		return 2
	}
	reg, err := knowledge.LoadRegistry(*packs)
	if err != nil {
		fmt.Fprintf(stderr, "factgate knowledge render: loading packs: %v\n", err)
		return 1
	}
	sc := knowledge.Scopes{}
	name := *setName
	if *replay != "" {
		p := reg.Pack(*packName)
		if name != "" {
			_, p = reg.Set(name)
		}
		if p == nil {
			fmt.Fprintf(stderr, "factgate knowledge render: unknown pack %q\n", *packName)
			return 2
		}
		text, err := os.ReadFile(*replay)
		if err != nil {
			fmt.Fprintf(stderr, "factgate knowledge render: %v\n", err)
			return 1
		}
		ex := knowledge.ExtractContext(p, string(text))
		if name == "" {
			name = ex.KnowledgeSet
			if name == "" {
				name = p.DefaultSet
			}
		}
		for dim, values := range ex.Scopes {
			sc[dim] = values
		}
	}
	if name == "" {
		fmt.Fprintln(stderr, "factgate knowledge render: need --set or --replay")
		fs.Usage()
		return 2
	}
	for _, s := range scopes {
		dim, values, ok := strings.Cut(s, "=")
		if !ok || dim == "" {
			fmt.Fprintf(stderr, "factgate knowledge render: --scope %q: want DIM=V1,V2\n", s)
			return 2
		}
		sc[dim] = splitList(values)
	}
	if *factions != "" {
		sc["factions"] = splitList(*factions)
	}
	if *mapID != "" {
		sc["maps"] = splitList(*mapID)
	}
	set, code := resolveSet(reg, name, *overlay, "render", stderr)
	if set == nil {
		return code
	}
	parts := inject.Parts{Knowledge: knowledge.Render(set, sc), AdditionalRules: *rules}
	if *knowledgeOnly {
		fmt.Fprint(stdout, parts.Knowledge)
		return 0
	}
	for _, f := range []struct {
		path string
		into *string
	}{{*customFile, &parts.Knowledge}, {*rulesFile, &parts.AdditionalRules}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			fmt.Fprintf(stderr, "factgate knowledge render: %v\n", err)
			return 1
		}
		*f.into = string(b)
	}
	if !*noContract {
		_, p := reg.Set(name)
		parts.Contract = inject.PackContract(p)
	}
	fmt.Fprintln(stdout, inject.Compose(parts))
	return 0
}

func runKnowledgeExport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newKnowledgeFlags("export", "--set NAME [--overlay FILE] [--packs DIR]",
		`Prints a knowledge set as indented JSON in the set file format — a starting
point for a user overlay: keep the entries you change, delete the rest, add new
ids, or mark an entry "disabled": true to remove it.`, stderr)
	setName := fs.String("set", "", "knowledge set to export (required)")
	overlay := fs.String("overlay", "", "export the set with this user overlay applied")
	packs := fs.String("packs", "", "folder of user packs to load besides the built-in ones")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *setName == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	reg, err := knowledge.LoadRegistry(*packs)
	if err != nil {
		fmt.Fprintf(stderr, "factgate knowledge export: loading packs: %v\n", err)
		return 1
	}
	set, code := resolveSet(reg, *setName, *overlay, "export", stderr)
	if set == nil {
		return code
	}
	stdout.Write(set.ToFile().JSON())
	return 0
}

func runKnowledgeList(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newKnowledgeFlags("list", "[--packs DIR]", "Lists the packs, their knowledge sets, dimensions and scope values.", stderr)
	packs := fs.String("packs", "", "folder of user packs to load besides the built-in ones")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	reg, err := knowledge.LoadRegistry(*packs)
	if err != nil {
		fmt.Fprintf(stderr, "factgate knowledge list: loading packs: %v\n", err)
		return 1
	}
	for _, p := range reg.Packs() {
		fmt.Fprintf(stdout, "pack %s (%s): %s\n", p.Name, p.Dir, p.Description)
		for _, name := range p.SetNames() {
			s := p.Set(name)
			def := ""
			if name == p.DefaultSet {
				def = " (default)"
			}
			fmt.Fprintf(stdout, "  set %s%s: %d global entries\n", name, def, len(s.Global()))
			for _, dim := range s.Dimensions {
				fmt.Fprintf(stdout, "    %s: %s\n", dim, strings.Join(s.ScopeValues(dim), ", "))
			}
		}
	}
	return 0
}

// resolveSet finds a set and applies an overlay file to it; on failure it prints
// why and returns the exit code.
func resolveSet(reg *knowledge.Registry, name, overlay, cmd string, stderr io.Writer) (*knowledge.Set, int) {
	set, _ := reg.Set(name)
	if set == nil {
		fmt.Fprintf(stderr, "factgate knowledge %s: unknown knowledge set %q (known: %s)\n", cmd, name, strings.Join(reg.SetNames(), ", "))
		return nil, 2
	}
	if overlay == "" {
		return set, 0
	}
	data, err := os.ReadFile(overlay)
	if err != nil {
		fmt.Fprintf(stderr, "factgate knowledge %s: %v\n", cmd, err)
		return nil, 1
	}
	eff, err := set.WithOverlay(data, overlay)
	if err != nil {
		printProblems(stderr, err)
		return nil, 1
	}
	return eff, 0
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
