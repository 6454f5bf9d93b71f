package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/configs/strictyaml"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/validate"
	"github.com/factgate/factgate/knowledge"
)

func init() {
	register("pack test", "run a pack's example cases (DIR/cases/*.yaml; exit 1 when one fails)", runPackTest)
	register("pack init", "scaffold a new pack folder that loads and passes its own example case (NAME)", runPackInit)
}

// CasesDir is the folder of a pack's example cases.
const casesDir = "cases"

// packCase is one example case of a pack (cases/*.yaml): facts, an answer, and
// the issues checking the answer against the facts must and must not produce.
//
//	name: a shipped order called delivered
//	facts: |                       # or facts_file: orders.json (relative to the case)
//	  {"orders": [{"id": "A-1001", "status": "shipped"}]}
//	answer: |                      # or answer_file: answer.md
//	  Your order A-1001 was delivered ...
//	issues:                        # each must be produced (path, severity optional)
//	  - {code: order.status_mismatch, path: "orderClaims[0]", severity: Contradiction}
//	not_issues:                    # none may be produced
//	  - {code: order.amount_mismatch}
//	exhaustive: true               # no issue of Warning or above beyond `issues`
type packCase struct {
	Name       string              `yaml:"name"`
	Facts      string              `yaml:"facts"`
	FactsFile  string              `yaml:"facts_file"`
	Answer     string              `yaml:"answer"`
	AnswerFile string              `yaml:"answer_file"`
	Set        string              `yaml:"set"`
	Scopes     map[string][]string `yaml:"scopes"`
	Issues     []caseIssue         `yaml:"issues"`
	NotIssues  []caseIssue         `yaml:"not_issues"`
	Exhaustive bool                `yaml:"exhaustive"`

	file string
}

// caseIssue is an issue a case expects (or forbids); an empty path or
// severity matches any.
type caseIssue struct {
	Code     string `yaml:"code"`
	Path     string `yaml:"path"`
	Severity string `yaml:"severity"`
}

func (c caseIssue) String() string {
	s := c.Code
	if c.Path != "" {
		s += " at " + c.Path
	}
	if c.Severity != "" {
		s += " (" + c.Severity + ")"
	}
	return s
}

func (c caseIssue) matches(is interceptors.Issue) bool {
	return is.Code == c.Code && (c.Path == "" || c.Path == is.Path) && (c.Severity == "" || strings.EqualFold(c.Severity, is.Severity.String()))
}

// loadCases reads every cases/*.yaml of the pack folder dir, in name order. A
// problem names the file and line.
func loadCases(dir string) ([]*packCase, error) {
	files, err := filepath.Glob(filepath.Join(dir, casesDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var cases []*packCase
	var errs []error
	for _, file := range files {
		c, err := loadCase(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cases = append(cases, c)
	}
	return cases, errors.Join(errs...)
}

func loadCase(file string) (*packCase, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c := &packCase{file: file}
	if err := strictyaml.Decode(data, file, c); err != nil {
		return nil, err
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc)
	var problems []string
	at := func(key string, n *yaml.Node) string {
		if n != nil {
			return fmt.Sprintf("%s:%d:%d: %s", file, n.Line, n.Column, key)
		}
		return file + ": " + key
	}
	root := &doc
	if len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	field := func(name string) *yaml.Node {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == name {
				return root.Content[i]
			}
		}
		return nil
	}
	dir := filepath.Dir(file)
	switch {
	case c.Facts != "" && c.FactsFile != "":
		problems = append(problems, at("facts_file", field("facts_file"))+": give facts or facts_file, not both")
	case c.FactsFile != "":
		b, err := os.ReadFile(filepath.Join(dir, c.FactsFile))
		if err != nil {
			problems = append(problems, at("facts_file", field("facts_file"))+": "+err.Error())
		}
		c.Facts = string(b)
	}
	switch {
	case c.Answer != "" && c.AnswerFile != "":
		problems = append(problems, at("answer_file", field("answer_file"))+": give answer or answer_file, not both")
	case c.AnswerFile != "":
		b, err := os.ReadFile(filepath.Join(dir, c.AnswerFile))
		if err != nil {
			problems = append(problems, at("answer_file", field("answer_file"))+": "+err.Error())
		}
		c.Answer = string(b)
	case c.Answer == "":
		problems = append(problems, file+": answer: missing (the answer to check)")
	}
	if c.Name == "" {
		c.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	for _, list := range []struct {
		key    string
		issues []caseIssue
	}{{"issues", c.Issues}, {"not_issues", c.NotIssues}} {
		n := field(list.key)
		var items []*yaml.Node
		if n != nil {
			for i := 0; i+1 < len(root.Content); i += 2 {
				if root.Content[i] == n && root.Content[i+1].Kind == yaml.SequenceNode {
					items = root.Content[i+1].Content
				}
			}
		}
		for i, is := range list.issues {
			var pos *yaml.Node
			if i < len(items) {
				pos = items[i]
			}
			key := fmt.Sprintf("%s[%d]", list.key, i)
			if is.Code == "" {
				problems = append(problems, at(key, pos)+": no code")
			}
			if is.Severity != "" && !slices.ContainsFunc(knowledge.RuleSeverities, func(s string) bool { return strings.EqualFold(s, is.Severity) }) {
				problems = append(problems, at(key+".severity", pos)+fmt.Sprintf(": unknown severity %q (want %s)", is.Severity, strings.Join(knowledge.RuleSeverities, ", ")))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return c, nil
}

// caseResult is the outcome of one case.
type caseResult struct {
	c          *packCase
	got        []interceptors.Issue
	missing    []caseIssue
	forbidden  []interceptors.Issue
	unexpected []interceptors.Issue
	err        error
}

func (r caseResult) ok() bool {
	return r.err == nil && len(r.missing) == 0 && len(r.forbidden) == 0 && len(r.unexpected) == 0
}

// runCases checks each case's answer against its facts with the pack's rules,
// as factgate check does.
func runCases(p *knowledge.Pack, cases []*packCase) ([]caseResult, error) {
	reg, err := knowledge.NewRegistry(p)
	if err != nil {
		return nil, err
	}
	off, err := validate.NewOffline([]*knowledge.Pack{p}, reg.Set, validate.OfflineOptions{})
	if err != nil {
		return nil, err
	}
	var out []caseResult
	for _, c := range cases {
		r := caseResult{c: c}
		req := validate.CheckRequest{Pack: p.Name, KnowledgeSet: c.Set, Answer: c.Answer}
		if c.Facts != "" {
			req.Facts = []string{c.Facts}
		}
		if len(c.Scopes) > 0 {
			req.Scopes = knowledge.Scopes{}
			for d, vs := range c.Scopes {
				req.Scopes[d] = vs
			}
		}
		rep, err := off.Check(req)
		if err != nil {
			if e := interceptors.AsError(err); e != nil {
				err = errors.New(e.Message)
			}
			r.err = err
			out = append(out, r)
			continue
		}
		r.got = rep.Issues
		for _, want := range c.Issues {
			if !slices.ContainsFunc(r.got, want.matches) {
				r.missing = append(r.missing, want)
			}
		}
		for _, is := range r.got {
			if slices.ContainsFunc(c.NotIssues, func(n caseIssue) bool { return n.matches(is) }) {
				r.forbidden = append(r.forbidden, is)
				continue
			}
			if c.Exhaustive && is.Severity >= interceptors.Warning && !slices.ContainsFunc(c.Issues, func(w caseIssue) bool { return w.matches(is) }) {
				r.unexpected = append(r.unexpected, is)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// writeCaseResults prints one line per case and, for a failing one, what was
// missing, forbidden or unexpected, and every issue the answer got. It returns
// the number of failing cases.
func writeCaseResults(w io.Writer, results []caseResult) int {
	failed := 0
	for _, r := range results {
		if r.ok() {
			fmt.Fprintf(w, "ok    %s (%s)\n", r.c.Name, r.c.file)
			continue
		}
		failed++
		fmt.Fprintf(w, "FAIL  %s (%s)\n", r.c.Name, r.c.file)
		if r.err != nil {
			fmt.Fprintf(w, "      the check could not run: %v\n", r.err)
			continue
		}
		for _, m := range r.missing {
			fmt.Fprintf(w, "      - missing:    %s\n", m)
		}
		for _, is := range r.forbidden {
			fmt.Fprintf(w, "      + forbidden:  %s at %s (%s): %s\n", is.Code, is.Path, is.Severity, is.Message)
		}
		for _, is := range r.unexpected {
			fmt.Fprintf(w, "      + unexpected: %s at %s (%s): %s\n", is.Code, is.Path, is.Severity, is.Message)
		}
		fmt.Fprintf(w, "      the answer got %d issue(s):\n", len(r.got))
		for _, is := range r.got {
			fmt.Fprintf(w, "        %-13s %s at %s: %s\n", is.Severity, is.Code, orRoot(is.Path), is.Message)
		}
	}
	return failed
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

// testPackDir loads the pack in dir and runs its cases, writing the results.
// It returns the exit status: 0 all pass, 1 a case fails, 2 the pack or a case
// does not load (or the pack has no cases).
func testPackDir(dir string, stdout, stderr io.Writer) int {
	p, err := knowledge.LoadPackDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "factgate pack test: %v\n", err)
		return 2
	}
	cases, err := loadCases(dir)
	if err != nil {
		fmt.Fprintf(stderr, "factgate pack test: %v\n", err)
		return 2
	}
	if len(cases) == 0 {
		fmt.Fprintf(stderr, "factgate pack test: %s has no cases (%s/*.yaml)\n", dir, filepath.Join(dir, casesDir))
		return 2
	}
	results, err := runCases(p, cases)
	if err != nil {
		fmt.Fprintf(stderr, "factgate pack test: pack %s: %v\n", p.Name, err)
		return 2
	}
	failed := writeCaseResults(stdout, results)
	if failed > 0 {
		fmt.Fprintf(stdout, "pack %s: %d of %d cases failed\n", p.Name, failed, len(results))
		return 1
	}
	fmt.Fprintf(stdout, "pack %s: %d cases pass\n", p.Name, len(results))
	return 0
}

func runPackTest(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("factgate pack test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: factgate pack test DIR...

Loads the pack in each folder DIR (its pack.yaml and every file it names) and runs
its example cases, DIR/cases/*.yaml: each case's answer is checked against its
facts with the pack's rules, offline, as factgate check does, and the issues it
gets are compared with the ones the case says it must produce (issues: code, and
optionally path and severity) and must not (not_issues); with exhaustive: true, no
other issue of severity Warning or above may appear. See docs/packs.md.

Output: ok or FAIL per case; a failing case lists what is missing, forbidden or
unexpected, and every issue the answer got. Exit status: 0 every case passes,
1 a case fails, 2 a pack or case does not load (every problem at file:line:column)
or a pack has no cases.
`)
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	status := 0
	for _, dir := range fs.Args() {
		status = max(status, testPackDir(dir, stdout, stderr))
	}
	return status
}
