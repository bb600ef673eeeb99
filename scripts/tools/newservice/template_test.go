//go:build templatetest

package main

import (
	"context"
	"errors"
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

// The tests in this file copy the repository and build and test whole
// services in it: minutes each on two cores, beyond make test's budget.
// They build only with -tags templatetest, which make template-test (run
// by .ci/run) passes.

// TestGeneratedServicePassesEveryTest is the template's CI: in a copy of
// the repository (its files as the working tree has them, without .git),
// it generates a service and runs go vet and go test on its module, then
// the drift tests that read the files the generator edited. The service's
// own tests include the compose and configuration-page drift test.
func TestGeneratedServicePassesEveryTest(t *testing.T) {
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
	goCmd(t, filepath.Join(root, "scripts"), "test", "-count=1", "./docgen/configdoc")
	// The compose file as the Compose loader reads it, and the NATS user
	// the generator added, against the streams the service declares.
	goCmd(t, filepath.Join(root, "pkg"), "test", "-count=1", "./testkit/composecheck")
	goCmd(t, filepath.Join(root, "scripts"), "test", "-count=1", "-run", "TestNATSConfigPermissionsFollowTheServices|TestNATSUsersDoTheirServicesWork", "./tests/deploytest")
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
