// Command apidoc writes the endpoint tables of the services' READMEs from
// the OpenAPI documents in docs/api, so that the tables are regenerated
// instead of retyped, and say what the handler tests hold the handlers to:
//
//	go run ./scripts/docgen/apidoc          print every table
//	go run ./scripts/docgen/apidoc -w       rewrite them in the READMEs
//
// A README asks for a table with a pair of markers naming the document:
//
//	<!-- apidoc:begin order.yaml -->
//	<!-- apidoc:end -->
//
// The test in this package fails when a table differs from what apidoc
// prints, and when a document has no table.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// The markers around a generated table; begin names the document.
const (
	beginPrefix = "<!-- apidoc:begin "
	end         = "<!-- apidoc:end -->\n"
)

var beginRe = regexp.MustCompile(`<!-- apidoc:begin ([a-z0-9-]+\.yaml) -->\n`)

func main() {
	write := len(os.Args) > 1 && os.Args[1] == "-w"
	if err := run(os.Stdout, write); err != nil {
		fmt.Fprintln(os.Stderr, "apidoc:", err)
		os.Exit(1)
	}
}

// run prints every document's table to w and, with write, rewrites the
// tables in the READMEs.
func run(w io.Writer, write bool) error {
	root, err := composecheck.Root()
	if err != nil {
		return err
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "api", "*.yaml"))
	if err != nil {
		return err
	}
	for _, path := range docs {
		table, err := Table(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s%s -->\n%s%s\n", beginPrefix, filepath.Base(path), table, end)
	}
	if !write {
		return nil
	}
	readmes, err := Readmes(root)
	if err != nil {
		return err
	}
	for _, path := range readmes {
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out, err := Regenerate(root, string(text))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Readmes returns the services' READMEs.
func Readmes(root string) ([]string, error) {
	return filepath.Glob(filepath.Join(root, "services", "*", "README.md"))
}

// Regenerate returns text with the table between each pair of markers
// replaced by the one its document gives.
func Regenerate(root, text string) (string, error) {
	var out strings.Builder
	for {
		m := beginRe.FindStringSubmatchIndex(text)
		if m == nil {
			out.WriteString(text)
			return out.String(), nil
		}
		j := strings.Index(text[m[1]:], end)
		if j < 0 {
			return "", errors.New("an apidoc:begin marker without its apidoc:end")
		}
		table, err := Table(filepath.Join(root, "docs", "api", text[m[2]:m[3]]))
		if err != nil {
			return "", err
		}
		out.WriteString(text[:m[1]])
		out.WriteString(table)
		text = text[m[1]+j:]
		out.WriteString(end)
		text = text[len(end):]
	}
}

// Documents returns the documents the markers in text name.
func Documents(text string) []string {
	var out []string
	for _, m := range beginRe.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// Table renders the document at path as a Markdown table: one row per
// operation, in the order of the document.
func Table(path string) (string, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return "", err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	order, err := pathOrder(path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| method, path | who | what | answers |\n|---|---|---|---|\n")
	for _, p := range order {
		item := doc.Paths.Value(p)
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			what := op.Summary
			if d := oneLine(op.Description); d != "" {
				what += ". " + d
			}
			fmt.Fprintf(&b, "| `%s %s` | %s | %s | %s |\n", method, p, cell(who(doc, op)), cell(what), cell(answers(op)))
		}
	}
	return b.String(), nil
}

// pathOrder reads the paths in the order the document lists them (the
// loaded document keeps them in a map).
func pathOrder(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Paths yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var out []string
	for i := 0; i+1 < len(doc.Paths.Content); i += 2 {
		out = append(out, doc.Paths.Content[i].Value)
	}
	return out, nil
}

// tokenNames says who holds the token of each security scheme.
var tokenNames = map[string]string{
	"accessToken":   "the customer (access token)",
	"adminToken":    "operator (token or `ADMIN_TOKEN`)",
	"internalToken": "services (`INTERNAL_TOKEN`)",
	"simToken":      "a lab (`PSP_ADMIN_TOKEN`)",
}

// who names the caller: the security scheme, the identifying headers and
// the other required headers.
func who(doc *openapi3.T, op *openapi3.Operation) string {
	var parts, headers []string
	security := op.Security
	if security == nil {
		security = &doc.Security
	}
	for _, req := range *security {
		for name := range req {
			parts = append(parts, tokenNames[name])
		}
	}
	signed := false
	for _, ref := range op.Parameters {
		p := ref.Value
		switch {
		case p.In != openapi3.ParameterInHeader || !p.Required:
		case strings.HasPrefix(p.Name, "X-PSP-"):
			signed = true
		default:
			headers = append(headers, "`"+p.Name+"`")
		}
	}
	if signed {
		parts = append(parts, "the platform, signed (`X-PSP-*`)")
	}
	if len(parts) == 0 {
		parts = append(parts, "anyone")
	}
	return strings.Join(append(parts, headers...), ", ")
}

// answers lists the statuses: with what they mean when the operation says
// it, bare when the answer is one the document shares between operations
// (a $ref to components.responses: "no or a wrong bearer token").
func answers(op *openapi3.Operation) string {
	codes := make([]int, 0, op.Responses.Len())
	for k := range op.Responses.Map() {
		code, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		codes = append(codes, code)
	}
	slices.Sort(codes)
	var b strings.Builder
	shared := false
	for i, code := range codes {
		r := op.Responses.Status(code)
		switch {
		case i == 0:
		case shared && r.Ref != "":
			b.WriteString(", ")
		default:
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "`%d`", code)
		if shared = r.Ref != ""; !shared {
			b.WriteString(" " + oneLine(*r.Value.Description))
		}
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.TrimSuffix(strings.Join(strings.Fields(s), " "), ".")
}

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
