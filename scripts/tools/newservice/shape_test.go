package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// realServices are the services the template is held to.
var realServices = []string{"order", "coupon", "payment"}

// TestTemplateHasTheShapeOfTheRealServices renders the template and reads
// it and every real service with go/ast: the same package roles, the same
// exported seams (the assembly's Definition, Options, Parts and Assemble,
// httpapi.New, lab.Plug, the test kit's Service and Start, app.New, the
// consumers' and jobs' types) and the same cmd/<name>/main.go, wire()
// included. It fails when the template or a service drifts from the others.
func TestTemplateHasTheShapeOfTheRealServices(t *testing.T) {
	root := composecheck.RepoRoot(t)
	template := readShape(t, renderTemplate(t, nil), templateName)
	var real []shape
	for _, svc := range realServices {
		real = append(real, readShape(t, filepath.Join(root, "services", svc), svc))
	}
	for _, d := range shapeDrift(template, real) {
		t.Error(d)
	}
}

// TestShapeDriftIsCaught: a template whose wire() lost its lab line, whose
// httpapi.New returns no error, or which lacks its test kit, is reported.
func TestShapeDriftIsCaught(t *testing.T) {
	root := composecheck.RepoRoot(t)
	var real []shape
	for _, svc := range realServices {
		real = append(real, readShape(t, filepath.Join(root, "services", svc), svc))
	}
	for what, edit := range map[string]func(files map[string][]byte){
		"wire() without the lab line": func(files map[string][]byte) {
			replaceIn(t, files, "cmd/"+templateName+"/main.go", "\tlab.Plug(&o, cfg)", "\t_ = lab.Plug")
		},
		"httpapi.New without its error": func(files map[string][]byte) {
			replaceIn(t, files, "internal/httpapi/httpapi.go", "func New(a *app.App, o Options) (*API, error) {", "func New(a *app.App, o Options) *API {")
		},
		"no test kit": func(files map[string][]byte) {
			for rel := range files {
				if strings.HasPrefix(rel, "services/"+templateName+"/internal/"+templateName+"test/") {
					delete(files, rel)
				}
			}
		},
	} {
		template := readShape(t, renderTemplate(t, edit), templateName)
		if d := shapeDrift(template, real); len(d) == 0 {
			t.Errorf("%s: no drift reported", what)
		}
	}
	if d := shapeDrift(readShape(t, renderTemplate(t, nil), templateName), real); len(d) != 0 {
		t.Fatalf("the template as it is drifts: %v", d)
	}
}

const templateName = "shapeprobe"

// renderTemplate renders the service template as templateName into a
// directory of the test's, after edit (when not nil) has changed the
// rendered files, and returns the service's directory.
func renderTemplate(t *testing.T, edit func(files map[string][]byte)) string {
	t.Helper()
	files, err := renderFiles(newService(templateName, 8099, "1.26.0"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(files)
	}
	dir := t.TempDir()
	for rel, b := range files {
		write(t, dir, rel, string(b))
	}
	return filepath.Join(dir, "services", templateName)
}

// replaceIn replaces old by new in the rendered file rel of the service.
func replaceIn(t *testing.T, files map[string][]byte, rel, old, new string) {
	t.Helper()
	key := "services/" + templateName + "/" + rel
	if !bytes.Contains(files[key], []byte(old)) {
		t.Fatalf("%s has no %q", key, old)
	}
	files[key] = bytes.Replace(files[key], []byte(old), []byte(new), 1)
}

// shapeDrift lists every way template and the real services differ.
func shapeDrift(template shape, real []shape) []string {
	var out []string
	for _, r := range real {
		for _, role := range template.roles {
			if !slices.Contains(r.roles, role) {
				out = append(out, fmt.Sprintf("the template has %s, %s has not", role, r.name))
			}
		}
		for _, seam := range template.seamNames() {
			if got, want := r.seams[seam], template.seams[seam]; got != want {
				out = append(out, fmt.Sprintf("%s:\n  %s: %s\n  template: %s", seam, r.name, orNone(got), orNone(want)))
			}
		}
		if r.main != template.main {
			out = append(out, fmt.Sprintf("cmd/%s/main.go differs from the template's:\n%s\n--- template:\n%s", r.name, r.main, template.main))
		}
	}
	// A role every real service has and the template lacks.
	for _, role := range real[0].roles {
		all := true
		for _, r := range real[1:] {
			all = all && slices.Contains(r.roles, role)
		}
		if all && !slices.Contains(template.roles, role) {
			out = append(out, fmt.Sprintf("every service has %s, the template has not", role))
		}
	}
	return out
}

// shape is what a service is held to.
type shape struct {
	name string
	// roles are its packages, the service's name replaced by NAME and a
	// peer's client (orderclient, peerclient) by *client.
	roles []string
	// seams are the exported declarations compared, by package and name,
	// each as its types print with the service's name replaced by NAME.
	seams map[string]string
	// main is cmd/<name>/main.go without comments and imports.
	main string
}

func (s shape) seamNames() []string {
	var names []string
	for n := range s.seams {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// readShape reads the service at dir, named name.
func readShape(t *testing.T, dir, name string) shape {
	t.Helper()
	s := shape{name: name, seams: map[string]string{}}
	fset := token.NewFileSet()
	norm := func(x string) string {
		return strings.ReplaceAll(x, name, "NAME")
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		gofiles, _ := filepath.Glob(filepath.Join(p, "*.go"))
		if len(gofiles) == 0 {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		role := norm(filepath.ToSlash(rel))
		if strings.HasPrefix(role, "internal/") && strings.HasSuffix(role, "client") {
			role = "internal/*client"
		}
		if !slices.Contains(s.roles, role) {
			s.roles = append(s.roles, role)
		}
		for _, f := range gofiles {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range file.Decls {
				seams(role, decl, func(key, sig string) {
					sig = norm(sig)
					// A key several declarations share (each consumer's
					// type) holds the set of what they print.
					if old, ok := s.seams[key]; ok && !slices.Contains(strings.Split(old, " | "), sig) {
						parts := append(strings.Split(old, " | "), sig)
						slices.Sort(parts)
						sig = strings.Join(parts, " | ")
					} else if ok {
						sig = old
					}
					s.seams[key] = sig
				})
			}
			if role == "cmd/NAME" && filepath.Base(f) == "main.go" {
				s.main = norm(mainText(t, fset, file))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.roles)
	return s
}

// seams calls add for each declaration of decl (in the package of role)
// that a service is held to.
func seams(role string, decl ast.Decl, add func(key, sig string)) {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		if d.Recv != nil {
			if role == "internal/httpapi" && d.Name.Name == "Register" {
				add("httpapi.(*API).Register", signature(d.Recv)+signature(d.Type))
			}
			return
		}
		key := role + "." + d.Name.Name
		switch role + "." + d.Name.Name {
		case "internal/assembly.Definition", "internal/assembly.Assemble", "internal/httpapi.New", "lab.Plug":
			add(key, signature(d.Type))
		case "internal/app.New":
			add(key, "results "+fields(d.Type.Results))
		}
		switch role {
		case "internal/messaging", "internal/jobs":
			// Every consumer is a platform.ConsumerOf, every job a platform.Job.
			add(role+" results", "each "+strings.SplitN(fields(d.Type.Results), "[", 2)[0])
		case "internal/NAMEtest":
			if d.Name.Name == "Start" {
				add(key+" results", fields(d.Type.Results))
			}
		}
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			key := role + "." + ts.Name.Name
			switch key {
			case "internal/assembly.Options":
				add(key+".Clock", fieldType(st, "Clock"))
			case "internal/assembly.Parts":
				add(key+".App", fieldType(st, "App"))
			case "internal/NAMEtest.Service":
				add(key+" embeds", fieldType(st, ""))
			}
		}
	}
}

// signature prints the types of a function or a receiver, without names.
func signature(n ast.Node) string {
	switch n := n.(type) {
	case *ast.FuncType:
		out := "func(" + fields(n.Params) + ")"
		if r := fields(n.Results); r != "" {
			out += " (" + r + ")"
		}
		return out
	case *ast.FieldList:
		return "(" + fields(n) + ") "
	}
	return ""
}

// fields prints the types of l, one per name.
func fields(l *ast.FieldList) string {
	if l == nil {
		return ""
	}
	var out []string
	for _, f := range l.List {
		n := max(len(f.Names), 1)
		for range n {
			out = append(out, expr(f.Type))
		}
	}
	return strings.Join(out, ", ")
}

// fieldType prints the type of st's field name ("": the embedded fields).
func fieldType(st *ast.StructType, name string) string {
	var out []string
	for _, f := range st.Fields.List {
		if name == "" && len(f.Names) == 0 {
			out = append(out, expr(f.Type))
		}
		for _, n := range f.Names {
			if n.Name == name && name != "" {
				out = append(out, expr(f.Type))
			}
		}
	}
	return strings.Join(out, ", ")
}

func expr(e ast.Expr) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, token.NewFileSet(), e)
	return b.String()
}

// mainText prints file's declarations other than its imports: main,
// service and wire. A node printed apart from its file loses its comments.
func mainText(t *testing.T, fset *token.FileSet, file *ast.File) string {
	t.Helper()
	var b bytes.Buffer
	for _, decl := range file.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		if f, ok := decl.(*ast.FuncDecl); ok {
			f.Doc = nil
		}
		if g, ok := decl.(*ast.GenDecl); ok {
			g.Doc = nil
		}
		if err := printer.Fprint(&b, fset, decl); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	return b.String()
}
