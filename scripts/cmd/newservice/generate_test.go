package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// templateTestsVar turns on the two tests that copy the repository and
// build and test whole services in it: minutes each on two cores, too
// long for make test's budget, so make template-test runs them.
const templateTestsVar = "ONCEMALL_TEMPLATE_TESTS"

// TestGeneratedServicePassesEveryTest is the template's CI: in a copy of
// the repository (its files as the working tree has them, without .git),
// it generates a service and runs go vet and go test on its module, then
// the drift tests that read the files the generator edited. The service's
// own tests include the compose and configuration-page drift test.
func TestGeneratedServicePassesEveryTest(t *testing.T) {
	if os.Getenv(templateTestsVar) == "" {
		t.Skip(templateTestsVar + " is not set: make template-test runs this (not yet in .ci/run: it has not passed end to end on a 2-core machine)")
	}
	src := composecheck.RepoRoot(t)
	name := probeName(t)
	root := t.TempDir()
	copyRepo(t, src, root)

	began := time.Now()
	s, _, err := Generate(root, name, 0, goCommand())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated services/%s on port %d in %s", name, s.Port, time.Since(began).Round(time.Second))

	service := filepath.Join(root, "services", name)
	goCmd(t, service, "vet", "./...")
	goCmd(t, service, "test", "-count=1", "./...")
	goCmd(t, service, "mod", "tidy", "-diff") // the generated go.mod is complete
	goCmd(t, filepath.Join(root, "scripts"), "test", "-count=1", "./cmd/configdoc")
	// The compose file as the Compose loader reads it, and the NATS user
	// the generator added, against the streams the service declares.
	goCmd(t, filepath.Join(root, "pkg"), "test", "-count=1", "./testkit/composecheck")
	goCmd(t, filepath.Join(root, "scripts"), "test", "-count=1", "-run", "TestNATSConfigPermissionsFollowTheServices|TestNATSUsersDoTheirServicesWork", "./deploytest")
	goCmd(t, filepath.Join(root, "pkg"), "vet", "./events")
	if out := command(t, root, "make", "-n", "build"); !strings.Contains(out, name) {
		t.Errorf("make build does not build %s:\n%s", name, out)
	}
	command(t, root, "bash", "-n", "scripts/run.sh")
	if _, _, err := Generate(root, name, 0, goCommand()); err == nil {
		t.Error("generating the service again was accepted")
	}
}

// copyRepo copies the files git knows in src (tracked, and new ones not
// ignored), as the working tree has them, into dst.
func copyRepo(t *testing.T, src, dst string) {
	t.Helper()
	out := command(t, src, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, rel := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		from := filepath.Join(src, rel)
		info, err := os.Lstat(from)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(from, to, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	command(t, dir, goCommand(), args...)
}

// command runs name with args in dir, in the workspace of the repository
// there (workspaceEnv), and fails t with its output when it fails.
func command(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = workspaceEnv()
	began := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(began).Round(100*time.Millisecond))
	return string(out)
}
