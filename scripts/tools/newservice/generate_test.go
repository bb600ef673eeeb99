package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// editedRepo returns a directory holding the files the generator reads and
// edits, copied from the repository around the test.
func editedRepo(t *testing.T) string {
	t.Helper()
	src, dst := composecheck.RepoRoot(t), t.TempDir()
	for _, rel := range []string{"go.work", "Makefile", "scripts/run.sh", "docker-compose.yml", "deploy/nats.conf", "docs/configuration.md", "pkg/go.mod"} {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		write(t, dst, rel, string(b))
	}
	return dst
}

// snapshot returns every file under root with its content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestGenerateWritesTheServiceAndRefusesTheSameNameAgain, with a go
// command that does nothing: the files are where the shape puts them, and
// a second run for the name changes nothing.
func TestGenerateWritesTheServiceAndRefusesTheSameNameAgain(t *testing.T) {
	root := editedRepo(t)
	name := probeName(t)
	port, err := choosePort(root, 0, mustLoad(t, root))
	if err != nil {
		t.Fatal(err)
	}
	s, edited, err := Generate(root, name, 0, "true")
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != port || len(edited) != len(edits) {
		t.Fatalf("port %d (want %d), edited %v", s.Port, port, edited)
	}
	for _, rel := range []string{
		"services/" + name + "/go.mod",
		"services/" + name + "/README.md",
		"services/" + name + "/cmd/" + name + "/main.go",
		"services/" + name + "/cmd/" + name + "/main_test.go",
		"services/" + name + "/internal/config/config.go",
		"services/" + name + "/internal/" + name + "/item.go",
		"services/" + name + "/internal/" + name + "/" + name + "_test.go",
		"services/" + name + "/internal/assembly/assembly.go",
		"services/" + name + "/internal/" + name + "test/" + name + "test.go",
		"services/" + name + "/internal/app/app.go",
		"services/" + name + "/internal/jobs/jobs.go",
		"services/" + name + "/internal/peerclient/peerclient.go",
		"services/" + name + "/lab/plug.go",
		"services/" + name + "/internal/store/store.go",
		"services/" + name + "/internal/httpapi/errors.go",
		"services/" + name + "/internal/messaging/item_created.go",
		"services/" + name + "/migrations/000001_create_items.up.sql",
		"pkg/events/" + name + ".go",
	} {
		if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
			t.Errorf("not generated: %v", err)
		}
	}
	assembly, err := os.ReadFile(filepath.Join(root, "services/"+name+"/internal/assembly/assembly.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(assembly, []byte(fmt.Sprintf("Port:       %d,", port))) {
		t.Errorf("assembly.go does not declare port %d:\n%s", port, assembly)
	}

	before := snapshot(t, root)
	if _, _, err := Generate(root, name, 0, "true"); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a second run: %v, want a refusal", err)
	}
	if p, err := choosePort(root, 0, mustLoad(t, root)); err != nil || p <= port {
		t.Fatalf("the next service's port = %d, %v; want one after %d, the one just declared", p, err, port)
	}
	if after := snapshot(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("a refused run changed files")
	}
}

func mustLoad(t *testing.T, root string) *composecheck.File {
	t.Helper()
	f, err := composecheck.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGenerateRollsBackWhenTheModuleDoesNotBuild: a failure after writing
// leaves the repository as it was.
func TestGenerateRollsBackWhenTheModuleDoesNotBuild(t *testing.T) {
	root := editedRepo(t)
	write(t, root, "pkg/events/events.go", "package events\n")
	before := snapshot(t, root)
	name := probeName(t)
	if _, _, err := Generate(root, name, 0, "false"); err == nil {
		t.Fatal("Generate succeeded although go failed")
	}
	if after := snapshot(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the repository was not restored: %d files before, %d after", len(before), len(after))
	}
	if _, err := os.Stat(filepath.Join(root, "services", name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("services/%s is left: %v", name, err)
	}
}
