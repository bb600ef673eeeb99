package docscheck

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// declSlack is how many lines a link into Go code may start after the line
// that declares what its text names (or before it, when there is no doc
// comment to start on).
const declSlack = 3

// TestGoLineLinksNameTheirDeclaration: a #Lx-Ly link into a .go file names,
// in backticks in its text, the declaration it shows (`deductFixed`,
// `Store.ReleaseLock`, `Config.Mode`), and the lines are that declaration's:
// they start on its doc comment or within a few lines of its first line,
// and end inside it. Code moves all the time; a range that silently slid
// onto its neighbour fails here instead of misleading a reader.
//
// And a Go or SQL code block just under a line link is an excerpt of the
// linked lines: every line of it (but "…" and blank lines) appears in them,
// in order, so the code a page shows is the code the repository runs.
//
// When code has moved, `go test ./tests/docscheck/ -run TestGoLineLinks -fix`
// points each such link at the whole declaration it names, and says where;
// read the pages it changed before committing them.
func TestGoLineLinksNameTheirDeclaration(t *testing.T) {
	root := composecheck.RepoRoot(t)
	problems, moves := checkGoLinks(root, markdownFiles(t, root))
	if *fixLinks {
		for _, m := range moves {
			if err := m.apply(root); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s:%d: %s → %s", m.doc, m.line, m.from, m.to)
		}
		problems, _ = checkGoLinks(root, markdownFiles(t, root))
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// fixLinks makes TestGoLineLinksNameTheirDeclaration move misplaced links.
var fixLinks = flag.Bool("fix", false, "point each misplaced Go line link at the declaration it names")

// move is the fix of one misplaced link: its target, from and to.
type move struct {
	doc      string
	line     int
	from, to string
}

// apply rewrites the link on its line of its page.
func (m move) apply(root string) error {
	path := filepath.Join(root, m.doc)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	old := "](" + m.from + ")"
	if !strings.Contains(lines[m.line-1], old) {
		return fmt.Errorf("%s:%d: no link to %s", m.doc, m.line, m.from)
	}
	lines[m.line-1] = strings.Replace(lines[m.line-1], old, "]("+m.to+")", 1)
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

// lineLink is a link to a line range of a file.
type lineLink struct {
	mdLink
	File        string // relative to the root
	First, Last int
}

// lineLinks returns the page's links with a line range.
func (p *page) lineLinks() []lineLink {
	var out []lineLink
	for _, l := range p.links() {
		if external(l.Target) {
			continue
		}
		file, anchor := resolve(p.Name, l.Target)
		if first, last, ok := lineRange(anchor); ok {
			out = append(out, lineLink{mdLink: l, File: file, First: first, Last: last})
		}
	}
	return out
}

// goLinks returns the page's links to a line range of Go code.
func (p *page) goLinks() []lineLink {
	return slices.DeleteFunc(p.lineLinks(), func(l lineLink) bool { return !strings.HasSuffix(l.File, ".go") })
}

// declName is a name in backticks a link's text gives: `Name` or
// `Type.Name`.
var declName = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?)`")

// checkGoLinks returns a problem for each line link into Go code of docs
// that does not name the declaration it points at, and for each excerpt
// under such a link that is not in the linked lines; and the moves that
// point the links whose named declaration is unambiguous at it.
func checkGoLinks(root string, docs []string) (problems []string, moves []move) {
	files := map[string]*goFile{}
	open := func(name string) (*goFile, error) {
		if f, ok := files[name]; ok {
			return f, nil
		}
		var f *goFile
		var err error
		if strings.HasSuffix(name, ".go") {
			f, err = parseGoFile(filepath.Join(root, name))
		} else {
			f, err = readLines(filepath.Join(root, name))
		}
		files[name] = f
		return f, err
	}
	for _, doc := range docs {
		p, err := readPage(root, doc)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, l := range p.goLinks() {
			f, err := open(l.File)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %v", doc, l.Line, l.Target, err))
				continue
			}
			m := declName.FindStringSubmatch(l.Text)
			if m == nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: its text %q names no declaration in backticks (`Name` or `Type.Name`)", doc, l.Line, l.Target, l.Text))
				continue
			}
			decls := f.decls[m[1]]
			if len(decls) == 0 {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %s declares no %s", doc, l.Line, l.Target, l.File, m[1]))
				continue
			}
			if !anyHolds(decls, l.First, l.Last) {
				d := decls[0]
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %s is at L%d-L%d of %s (declared on L%d): link to #L%d-L%d",
					doc, l.Line, l.Target, m[1], d.start, d.end, l.File, d.line, d.start, d.end))
				if len(decls) == 1 {
					path, _, _ := strings.Cut(l.Target, "#")
					moves = append(moves, move{doc: doc, line: l.Line, from: l.Target, to: fmt.Sprintf("%s#L%d-L%d", path, d.start, d.end)})
				}
			}
		}
		for _, e := range p.excerpts() {
			f, err := open(e.link.File)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %v", doc, e.link.Line, e.link.Target, err))
				continue
			}
			if missing := e.notIn(f.lines, e.link.First, e.link.Last); missing != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: the excerpt under the link to %s shows %q, which is not in those lines (in that order)",
					doc, e.line, e.link.Target, missing))
			}
		}
	}
	return problems, moves
}

// decl is where a declaration is: its doc comment's first line (its own
// line when it has none), the line naming it, its last line.
type decl struct{ start, line, end int }

// holds reports whether the lines first..last show d.
func (d decl) holds(first, last int) bool {
	return first >= min(d.start, d.line-declSlack) && first <= d.line+declSlack && last <= d.end && last >= first
}

func anyHolds(ds []decl, first, last int) bool {
	for _, d := range ds {
		if d.holds(first, last) {
			return true
		}
	}
	return false
}

// goFile is a parsed Go file: its lines, and its declarations by name
// (functions, methods as Type.Name and Name, types, vars, consts, and the
// fields and interface methods of its types as Type.Field).
type goFile struct {
	lines []string
	decls map[string][]decl
}

// readLines reads a file that is not Go: its lines, no declarations.
func readLines(path string) (*goFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return &goFile{lines: strings.Split(string(src), "\n")}, nil
}

func parseGoFile(path string) (*goFile, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	f := &goFile{lines: strings.Split(string(src), "\n"), decls: map[string][]decl{}}
	line := func(p token.Pos) int { return fset.Position(p).Line }
	add := func(name string, doc *ast.CommentGroup, pos, end token.Pos) {
		d := decl{start: line(pos), line: line(pos), end: line(end)}
		if doc != nil {
			d.start = line(doc.Pos())
		}
		f.decls[name] = append(f.decls[name], d)
	}
	for _, node := range file.Decls {
		switch n := node.(type) {
		case *ast.FuncDecl:
			add(n.Name.Name, n.Doc, n.Pos(), n.End())
			if n.Recv != nil && len(n.Recv.List) == 1 {
				add(receiver(n.Recv.List[0].Type)+"."+n.Name.Name, n.Doc, n.Pos(), n.End())
			}
		case *ast.GenDecl:
			for _, spec := range n.Specs {
				doc, pos, end := n.Doc, n.Pos(), n.End()
				if n.Lparen.IsValid() { // a group: each spec is its own declaration
					pos, end = spec.Pos(), spec.End()
					doc = nil
				}
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if n.Lparen.IsValid() {
						doc = s.Doc
					}
					add(s.Name.Name, doc, pos, end)
					f.members(s, add)
				case *ast.ValueSpec:
					if n.Lparen.IsValid() {
						doc = s.Doc
					}
					for _, name := range s.Names {
						add(name.Name, doc, pos, end)
					}
				}
			}
		}
	}
	return f, nil
}

// members adds the fields of a struct type and the methods of an interface
// type as Type.Name.
func (f *goFile) members(s *ast.TypeSpec, add func(string, *ast.CommentGroup, token.Pos, token.Pos)) {
	var list *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	}
	if list == nil {
		return
	}
	for _, field := range list.List {
		for _, name := range field.Names {
			add(s.Name.Name+"."+name.Name, field.Doc, field.Pos(), field.End())
		}
	}
}

// receiver is the type name of a method's receiver: T for T, *T, T[K] and
// *T[K].
func receiver(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiver(t.X)
	case *ast.IndexExpr:
		return receiver(t.X)
	case *ast.IndexListExpr:
		return receiver(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// excerpt is a Go or SQL code block right under a line link.
type excerpt struct {
	line int // of the block's first code line, 1-based
	link lineLink
	code []string
}

// excerptFences open the code blocks that must be excerpts when a line link
// stands right above them.
var excerptFences = map[string]bool{"```go": true, "```sql": true}

// htmlOnly matches a line of HTML tags alone (a table cell's <td>), which
// may stand between a link and its excerpt.
var htmlOnly = regexp.MustCompile(`^\s*(<[^>]*>\s*)*$`)

// excerpts returns the page's ```go and ```sql blocks whose nearest line
// above (blank lines and lines of HTML tags skipped) holds a line link; the
// last such link of that line is the excerpt's source.
func (p *page) excerpts() []excerpt {
	byLine := map[int]lineLink{}
	for _, l := range p.lineLinks() {
		byLine[l.Line] = l // the last link of a line wins
	}
	var out []excerpt
	for i := 0; i < len(p.Lines); i++ {
		if !excerptFences[strings.TrimSpace(p.Lines[i])] {
			continue
		}
		above := i - 1
		for above >= 0 && !p.Fence[above] && htmlOnly.MatchString(p.Lines[above]) {
			above--
		}
		end := i + 1
		for end < len(p.Lines) && !strings.HasPrefix(strings.TrimSpace(p.Lines[end]), "```") {
			end++
		}
		if l, ok := byLine[above+1]; ok && above >= 0 {
			out = append(out, excerpt{line: i + 2, link: l, code: p.Lines[i+1 : end]})
		}
		i = end
	}
	return out
}

// notIn returns the first line of the excerpt that lines[first-1:last]
// does not hold after the lines before it (compared without surrounding
// space), or "" when every line is there in order. Blank lines and "…"
// (alone, or as a comment) stand for what the excerpt leaves out, and a
// line ending in "…" shows the start of a longer one.
func (e excerpt) notIn(lines []string, first, last int) string {
	next := first - 1
	for _, c := range e.code {
		c = strings.TrimSpace(c)
		if c == "" || c == "…" || c == "// …" || c == "..." {
			continue
		}
		for next < min(last, len(lines)) && !sameLine(strings.TrimSpace(lines[next]), c) {
			next++
		}
		if next >= min(last, len(lines)) {
			return c
		}
		next++
	}
	return ""
}

// sameLine reports whether the code line shows as the excerpt's line c.
func sameLine(code, c string) bool {
	if start, cut := strings.CutSuffix(c, "…"); cut {
		return strings.HasPrefix(code, strings.TrimSpace(start))
	}
	return code == c
}

// TestCheckGoLinksFailsOnMisplacedLinks: a line link whose text names no
// declaration, names one the file lacks, or points at lines that are not
// the declaration it names (a range that slid onto the next function, or
// runs past the named one's end), and an excerpt that differs from the
// linked lines, are each one problem; links that start on a declaration's
// doc comment or its first lines, and a faithful excerpt with an elision,
// are none.
func TestCheckGoLinksFailsOnMisplacedLinks(t *testing.T) {
	code := `package x

// A does a.
func A() int {
	n := 1
	n++
	return n
}

func B() {}

// T is a type.
type T struct {
	// F is a field.
	F int
}

// M is a method.
func (t *T) M() {}

const (
	// C is a constant.
	C = 1
)
`
	good := "[`A`](code.go#L3-L8) [`A`, the body](code.go#L5-L7) [`B`](code.go#L10) [`T.F`](code.go#L14-L15) [`T.M`](code.go#L18-L19) [`C`](code.go#L22-L23)\n\n" +
		"<td>\n\n[`A`](code.go#L3-L8)\n\n```go\n// A does …\nfunc A() int {\n\t…\n\treturn n\n}\n```\n"
	bad := "[code.go#L3-L8](code.go#L3-L8)\n[`Z`](code.go#L3-L8)\n[`A`](code.go#L10)\n[`A`](code.go#L3-L10)\n\n[`A`](code.go#L3-L8)\n\n```go\nfunc A() int {\n\treturn n + 1\n}\n```\n"
	schema := "CREATE TABLE t (\n  id BIGINT,\n  UNIQUE KEY uk_t (id)\n);\n"
	good += "\n[schema](schema.sql#L1-L4)\n\n```sql\nCREATE TABLE t (\n  …\n  UNIQUE KEY uk_t (id)\n```\n"
	bad += "\n[schema](schema.sql#L1-L2)\n\n```sql\nUNIQUE KEY uk_t (id)\n```\n"
	root := writeFiles(t, map[string]string{"code.go": code, "schema.sql": schema, "good.md": good, "bad.md": bad})
	problems, moves := checkGoLinks(root, []string{"good.md"})
	wantProblems(t, problems)
	if len(moves) != 0 {
		t.Errorf("moves for good links: %v", moves)
	}
	problems, moves = checkGoLinks(root, []string{"bad.md"})
	wantProblems(t, problems,
		"bad.md:1: link to code.go#L3-L8: its text \"code.go#L3-L8\" names no declaration",
		"bad.md:2: link to code.go#L3-L8: code.go declares no Z",
		"bad.md:3: link to code.go#L10: A is at L3-L8 of code.go (declared on L4): link to #L3-L8",
		"bad.md:4: link to code.go#L3-L10: A is at L3-L8",
		"bad.md:9: the excerpt under the link to code.go#L3-L8 shows \"return n + 1\"",
		"bad.md:17: the excerpt under the link to schema.sql#L1-L2 shows \"UNIQUE KEY uk_t (id)\"")

	// The slid links are moved onto A, and then hold.
	if len(moves) != 2 {
		t.Fatalf("%d moves, want the two links that name A: %v", len(moves), moves)
	}
	for _, m := range moves {
		if err := m.apply(root); err != nil {
			t.Fatal(err)
		}
	}
	problems, _ = checkGoLinks(root, []string{"bad.md"})
	for _, p := range problems {
		if strings.Contains(p, "A is at") {
			t.Errorf("after the moves: %s", p)
		}
	}
}
