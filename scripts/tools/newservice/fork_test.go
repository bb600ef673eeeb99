//go:build templatetest

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestForkRecipe runs docs/forking.md's "One service on its own" as the
// page states it, for a generated service and each real one, in a copy of
// the repository: its first block (the service alone with pkg, tidied,
// built, its cmd tests run), then its second (lab/ and the lab.Plug line
// deleted, built), then for order and the generated service go vet (every
// test compiles without the lab) and the cmd tests again. The page and this test change together.
func TestForkRecipe(t *testing.T) {
	src := composecheck.RepoRoot(t)
	page, err := os.ReadFile(filepath.Join(src, "docs", "forking.md"))
	if err != nil {
		t.Fatal(err)
	}
	take, dropLab := forkBlocks(t, string(page))
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	copyRepo(t, src, repo)
	for _, svc := range []string{"inventory", "order", "coupon", "payment"} {
		t.Run(svc, func(t *testing.T) {
			script := strings.Replace(take, "svc=inventory", "svc="+svc, 1) + "\n" + dropLab
			if svc == "inventory" || svc == "order" {
				// The page says their tests need no lab: every test
				// compiles (vet) and the service's run.
				script += "\ngo vet ./... && go test ./cmd/...\n"
			}
			runScript(t, repo, script)
			if _, err := os.Stat(filepath.Join(base, svc, "services", svc, "lab")); !os.IsNotExist(err) {
				t.Errorf("services/%s/lab is still there: %v", svc, err)
			}
		})
	}
}

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// forkBlocks returns the two sh blocks of the page's section 3.
func forkBlocks(t *testing.T, page string) (take, dropLab string) {
	t.Helper()
	_, section, ok := strings.Cut(page, "## 3. One service on its own")
	if !ok {
		t.Fatal("docs/forking.md has no section 3. One service on its own")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := shBlock.FindAllStringSubmatch(section, -1)
	if len(blocks) != 2 || !strings.HasPrefix(blocks[0][1], "svc=inventory ") {
		t.Fatalf("section 3 has %d sh blocks, want 2, the first starting svc=inventory", len(blocks))
	}
	return blocks[0][1], blocks[1][1]
}

// runScript runs script with bash -e in dir, in the environment of the
// repository there (workspaceEnv), failing t with its output.
func runScript(t *testing.T, dir, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	// -trimpath lets the services share the compiled pkg: the same
	// module path in every copy, not the copy's directory, names it.
	cmd.Env = append(workspaceEnv(), "GOFLAGS=-trimpath")
	began := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v after %s:\n%s\n--- script:\n%s", err, time.Since(began).Round(time.Second), out, script)
	}
	t.Logf("ran in %s", time.Since(began).Round(time.Second))
}
