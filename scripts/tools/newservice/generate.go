package main

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// templates holds the files of a new service (template/, mirroring the
// repository's layout) and the text inserted into existing files (insert/).
//
//go:embed template insert
var templates embed.FS

// Service is what the templates are rendered with.
type Service struct {
	Name      string // inventory: the directory, the module, the database and stream root
	Title     string // Inventory: the prefix of its identifiers in pkg/events
	Upper     string // INVENTORY: the prefix of its own environment variables
	Port      int
	GoVersion string // the go directive of pkg/go.mod, which the module repeats
}

func newService(name string, port int, goVersion string) Service {
	return Service{Name: name, Title: strings.ToUpper(name[:1]) + name[1:], Upper: strings.ToUpper(name), Port: port, GoVersion: goVersion}
}

// Generate creates the service name in the repository at root and wires it
// in, running goCmd to tidy and build the new module. Port 0 chooses one.
// It returns the service and the existing files it edited. Nothing is
// written until every file has been rendered and every edit has found its
// anchor, and any failure after that puts the repository back as it was.
func Generate(root, name string, port int, goCmd string) (Service, []string, error) {
	if err := checkName(name); err != nil {
		return Service{}, nil, err
	}
	compose, err := composecheck.Load(root)
	if err != nil {
		return Service{}, nil, err
	}
	if err := checkNameFree(root, name, compose); err != nil {
		return Service{}, nil, err
	}
	if port, err = choosePort(root, port, compose); err != nil {
		return Service{}, nil, err
	}
	goVersion, err := goDirective(filepath.Join(root, "pkg", "go.mod"))
	if err != nil {
		return Service{}, nil, err
	}
	s := newService(name, port, goVersion)

	files, err := renderFiles(s)
	if err != nil {
		return s, nil, err
	}
	edited := map[string][]byte{}
	var paths []string
	for _, e := range edits {
		src, err := os.ReadFile(filepath.Join(root, e.path))
		if err != nil {
			return s, nil, err
		}
		out, err := e.apply(string(src), s)
		if err != nil {
			return s, nil, fmt.Errorf("%s: %w", e.path, err)
		}
		edited[e.path] = []byte(out)
		paths = append(paths, e.path)
	}
	if err := checkCompose(edited["docker-compose.yml"], name); err != nil {
		return s, nil, err
	}

	w := &writer{root: root, serviceDir: filepath.Join(root, "services", name)}
	err = w.write(files, edited)
	if err == nil {
		err = goRun(goCmd, w.serviceDir, "mod", "tidy")
	}
	if err == nil {
		err = goRun(goCmd, w.serviceDir, "build", "./...")
	}
	if err != nil {
		return s, nil, errors.Join(err, w.rollback())
	}
	return s, paths, nil
}

// renderFiles renders every file under template/ for s, keyed by its path
// in the repository, with the Go files gofmt'ed: the alignment of a struct
// depends on the length of the names rendered into it.
func renderFiles(s Service) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(templates, "template", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		out, err := render(p, s)
		if err != nil {
			return err
		}
		target := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(p, "template/"), ".tmpl"), "NAME", s.Name)
		if strings.HasSuffix(target, ".go") {
			if out, err = format.Source(out); err != nil {
				return fmt.Errorf("%s renders invalid Go: %w", p, err)
			}
		}
		files[target] = out
		return nil
	})
	return files, err
}

// render executes the embedded template at p with s.
func render(p string, s Service) ([]byte, error) {
	text, err := templates.ReadFile(p)
	if err != nil {
		return nil, err
	}
	t, err := template.New(path.Base(p)).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// checkCompose parses the edited compose file as the drift test will,
// which catches an insertion that breaks the YAML before anything is
// written.
func checkCompose(compose []byte, name string) error {
	dir, err := os.MkdirTemp("", "newservice")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "docker-compose.yml"), compose, 0o644); err != nil {
		return err
	}
	f, err := composecheck.Load(dir)
	if err != nil {
		return fmt.Errorf("the edited docker-compose.yml: %w", err)
	}
	if _, ok := f.Services[name]; !ok {
		return fmt.Errorf("the edited docker-compose.yml has no service %s", name)
	}
	return nil
}

var goLine = regexp.MustCompile(`(?m)^go ([0-9][0-9.]*)\s*$`)

// goDirective returns the Go version a go.mod declares.
func goDirective(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	m := goLine.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s has no go directive", gomod)
	}
	return string(m[1]), nil
}

// goRun runs the go command with args in dir, returning its output with
// its error.
func goRun(goCmd, dir string, args ...string) error {
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = dir
	cmd.Env = workspaceEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}

// workspaceEnv is the process's environment less GOWORK, so that the go
// command uses the go.work of the repository it runs in: the new module is
// built in the workspace it was added to.
func workspaceEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	return env
}

// writer writes the generated files and the edits, and can take them back.
type writer struct {
	root       string
	serviceDir string
	madeDir    bool              // serviceDir was created by write
	created    []string          // files created outside serviceDir
	originals  map[string][]byte // edited files, as they were
}

// write creates files (refusing any that exists) and replaces the edited
// files' contents, keeping their modes.
func (w *writer) write(files, edited map[string][]byte) error {
	w.originals = map[string][]byte{}
	// Mkdir, not MkdirAll: a directory that appeared since the name was
	// checked is refused, and never removed by rollback.
	if err := os.MkdirAll(filepath.Dir(w.serviceDir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(w.serviceDir, 0o755); err != nil {
		return err
	}
	w.madeDir = true
	for rel, content := range files {
		p := filepath.Join(w.root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(p, w.serviceDir+string(filepath.Separator)) {
			w.created = append(w.created, p)
		}
		_, err = f.Write(content)
		if err := errors.Join(err, f.Close()); err != nil {
			return err
		}
	}
	for rel, content := range edited {
		p := filepath.Join(w.root, filepath.FromSlash(rel))
		old, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w.originals[p] = old
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rollback removes the service's directory and the other files write
// created, and restores the edited files.
func (w *writer) rollback() error {
	var errs []error
	if w.madeDir {
		errs = append(errs, os.RemoveAll(w.serviceDir))
	}
	for _, p := range w.created {
		errs = append(errs, os.Remove(p))
	}
	for p, old := range w.originals {
		errs = append(errs, os.WriteFile(p, old, 0o644))
	}
	return errors.Join(errs...)
}
