package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// packNameRe is what a scaffolded pack's name may be: it names the folder, the
// knowledge set and the record set.
var packNameRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

func runPackInit(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("factgate pack init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: factgate pack init [--dir DIR] NAME

Scaffolds a new pack in the folder DIR/NAME (DIR defaults to the current folder):
pack.yaml (records read from the request's JSON, one claim kind), rules.yaml (two
CEL rules), contract.md, messages.yaml, the revision, repair and notice templates,
a knowledge set and two example cases. The folder loads as it is and passes its own
cases (factgate pack test DIR/NAME); edit it from there — docs/packs.md walks through
each file. NAME is lower-case letters, digits and dashes. An existing folder is
never overwritten.

Flags:
`)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", ".", "the folder to create the pack's folder in")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	name := fs.Arg(0)
	if !packNameRe.MatchString(name) {
		fmt.Fprintf(stderr, "factgate pack init: %q: a pack name is lower-case letters, digits and dashes, starting with a letter\n", name)
		return 2
	}
	root := filepath.Join(*dir, name)
	if _, err := os.Stat(root); err == nil {
		fmt.Fprintf(stderr, "factgate pack init: %s exists already; pick another name or folder\n", root)
		return 2
	}
	files := scaffoldFiles(name)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			fmt.Fprintf(stderr, "factgate pack init: %v\n", err)
			return 2
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			fmt.Fprintf(stderr, "factgate pack init: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "created %s\n", full)
	}
	fmt.Fprintf(stdout, "\nNext: factgate pack test %s   (then edit the files; docs/packs.md explains each)\n", root)
	return 0
}

// scaffoldFiles returns the files of a new pack named name, by path in its
// folder.
func scaffoldFiles(name string) map[string]string {
	r := strings.NewReplacer("NAME", name)
	out := map[string]string{}
	for p, text := range scaffold {
		out[r.Replace(p)] = r.Replace(text)
	}
	return out
}

// scaffold is the new pack's files; NAME stands for its name.
var scaffold = map[string]string{
	"pack.yaml": `# The NAME pack (scaffolded by factgate pack init; see docs/packs.md). The request
# carries items as JSON (a tool result or a user message: {"items": [...]}); the
# model answers in prose with a claims block about them, checked by rules.yaml.
name: NAME
description: Claims about the request's items checked against their records
language: en

knowledge_sets:
  NAME:
    file: sets/NAME.json
    dimensions: []
    headings:
      global: What the items mean
default_set: NAME

# The pack applies to a request whose user or tool message carries the items JSON,
# or whose app prompt asks for the claims block.
applies:
  records: true
  marker: true

# The facts: the records the request carries, by key.
facts:
  version: NAME-records/1
  records:
    - set: items
      from: [user, tool]
      path: items
      key: id
      fields:
        id: string
        status: string
        price: number

claims:
  marker: '[machine-readable claims]'
  contract: contract.md
  kinds:
    itemClaims:
      cap: 5
      fields:
        item: string
        status: string
        price: number
        claim: string
        evidenceLevel: level
        evidence: strings
        alternatives: strings
        needsConfirmation: strings
      required: [item, claim]

rules: rules.yaml
messages_file: messages.yaml

revision:
  template: revision.tmpl
  repair_template: repair.tmpl
  notice_template: notice.tmpl
  leak_phrases: [sorry, apolog, previous answer, revised, correction]
`,
	"rules.yaml": `# The NAME pack's rules (docs/packs.md): a CEL condition per rule over the claim
# and the records; the message is messages.yaml's for the rule's id.
rules:
  - id: item.unknown
    kind: itemClaims
    severity: Contradiction
    notice: contradiction
    when: 'size(records("items")) > 0 && record("items", claim.item) == null'
    args: {item: 'claim.item'}
    recommend: {remove: true}

  - id: item.status_mismatch
    kind: itemClaims
    severity: Contradiction
    notice: contradiction
    let:
      rec: 'record("items", claim.item)'
    when: 'rec != null && has(claim.status) && has(rec.status) && claim.status != rec.status'
    args: {item: 'claim.item', status: 'claim.status', actual: 'rec.status'}
    recommend: {level: ruled out, alternatives: '[rec.status]'}
`,
	"contract.md": "## Machine-readable claims (required)\n\n" +
		"After the answer, write the marker `[machine-readable claims]` on a line of its own, then one ```json code block holding a JSON object; write nothing after it.\n\n" +
		"The object has one array, **itemClaims** (at most 5), one item per statement about an item:\n" +
		"- `item` (string): the item's id, as the records write it.\n" +
		"- `claim` (string): the statement in words.\n" +
		"- `status` (string) and `price` (number), when the statement gives them.\n" +
		"- `evidenceLevel` (string): confirmed, highly likely, possible, uncertain or ruled out.\n" +
		"- `evidence` (array of strings): the record fields it rests on, `item|<id>|<field>`.\n" +
		"- `alternatives`, `needsConfirmation` (arrays of strings).\n\n" +
		"Example:\n\n[machine-readable claims]\n```json\n" +
		`{"itemClaims": [{"item": "I-1", "claim": "Item I-1 is in stock", "status": "in_stock", "evidenceLevel": "confirmed", "evidence": ["item|I-1|status"], "alternatives": [], "needsConfirmation": []}]}` +
		"\n```\n",
	"messages.yaml": `# Issue messages per code (Go templates over .Args); notice is the heading.
claims.missing:
  message: The answer has no machine-readable claims.
  notice: unverified
  recommendation: 'End the answer with {{.Args.marker}} and the claims object in a json block.'
claims.json_invalid:
  message: The machine-readable claims are not valid JSON.
  notice: unverified
item.unknown:
  message: There is no item {{.Args.item}} in the records.
  notice: contradiction
  recommendation: Speak only of the items the records list.
item.status_mismatch:
  message: Item {{.Args.item}} is {{.Args.actual}}, not {{.Args.status}}.
  notice: contradiction
  recommendation: State the status the record shows ({{.Args.actual}}).
revision.leak:
  message: The answer mentions the revision or apologises.
  notice: unverified
`,
	"revision.tmpl": `Write the whole answer again. The previous answer has these problems:
{{range .Issues}}
{{.N}}. {{.Message}}{{if .Recommendation}} {{.Recommendation}}{{end}}
{{- end}}

Keep what was right{{if .Marker}}, end with {{.Marker}} and the claims block{{end}}, and answer as if for the first time: do not mention a check or a change.
`,
	"repair.tmpl": "The previous answer lacks the machine-readable claims. Output only the line `{{.Marker}}` and the ```json claims block, consistent with the answer.\n",
	"notice.tmpl": `{{- range $i, $g := .Groups}}{{if $i}}
{{end}}⚠ {{if eq .Heading "contradiction"}}The records contradict:{{else if eq .Heading "citation"}}Cited fields not in the records:{{else if eq .Heading "weak"}}Not backed well enough:{{else}}Could not be checked:{{end}}
{{range .Claims}}- “{{.Claim}}”: {{range .Findings}}{{.Message}} {{end}}
{{end}}{{range .Findings}}- {{.Message}}
{{end}}{{end -}}
`,
	"sets/NAME.json": `{
  "taxonomy": {"tags": ["status"]},
  "global": {
    "entries": [
      {"id": "statuses", "tags": ["status"], "text": "### Item statuses\n- in_stock: can ship today.\n- backorder: ships when restocked."}
    ]
  }
}
`,
	"cases/items.json": `{"items": [{"id": "I-1", "status": "in_stock", "price": 12.5}, {"id": "I-2", "status": "backorder", "price": 40}]}
`,
	"cases/clean.yaml": "name: a correct answer passes\nfacts_file: items.json\nanswer: |\n  Item I-1 is in stock.\n\n  [machine-readable claims]\n  ```json\n" +
		`  {"itemClaims": [{"item": "I-1", "claim": "Item I-1 is in stock", "status": "in_stock", "evidenceLevel": "confirmed", "evidence": ["item|I-1|status"]}]}` +
		"\n  ```\nissues: []\nexhaustive: true\n",
	"cases/status.yaml": "name: a status the record does not show\nfacts_file: items.json\nanswer: |\n  Item I-2 is in stock.\n\n  [machine-readable claims]\n  ```json\n" +
		`  {"itemClaims": [{"item": "I-2", "claim": "Item I-2 is in stock", "status": "in_stock", "evidenceLevel": "confirmed", "evidence": ["item|I-2|status"]}]}` +
		"\n  ```\nissues:\n  - {code: item.status_mismatch, path: \"itemClaims[0]\", severity: Contradiction}\nexhaustive: true\n",
}
