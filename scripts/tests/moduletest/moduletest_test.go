// Package moduletest holds the repository's module boundaries: what a
// production binary links, and what each module requires.
package moduletest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// testOnly are the import paths a production binary must not link: the
// test kit and the libraries only it uses.
var testOnly = []string{
	"github.com/oncemall/oncemall/pkg/testkit",
	"github.com/compose-spec/compose-go",
	"github.com/getkin/kin-openapi",
}

// TestProductionBuildsLeaveTheTestKitOut: every program under services/
// builds without the test kit, compose-go or kin-openapi in its package
// graph.
func TestProductionBuildsLeaveTheTestKitOut(t *testing.T) {
	root, err := composecheck.Root()
	if err != nil {
		t.Fatal(err)
	}
	mains, err := filepath.Glob(filepath.Join(root, "services", "*", "cmd", "*"))
	if err != nil || len(mains) == 0 {
		t.Fatalf("no programs under services/*/cmd: %v", err)
	}
	for _, dir := range mains {
		rel, _ := filepath.Rel(root, dir)
		t.Run(rel, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", ".")
			cmd.Dir = dir
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps: %v", err)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 50 {
				t.Fatalf("go list -deps listed %d packages; a service links far more", len(deps))
			}
			for _, dep := range deps {
				for _, bad := range testOnly {
					if dep == bad || strings.HasPrefix(dep, bad+"/") {
						t.Errorf("%s links %s, which only tests may use", rel, dep)
					}
				}
			}
		})
	}
}

// simulator is the payment platform's stand-in: payment's tests and lab
// run against it, so payment's module may require it; no other module
// under services/ may require another.
const simulator = "github.com/oncemall/oncemall/services/psp-sim"

// TestNoServiceRequiresAnother: each module under services/ requires pkg's
// modules and libraries, never another service's module (but payment the
// simulator's), so one service can be taken out of the repository with
// pkg alone.
func TestNoServiceRequiresAnother(t *testing.T) {
	root, err := composecheck.Root()
	if err != nil {
		t.Fatal(err)
	}
	mods, err := filepath.Glob(filepath.Join(root, "services", "*", "go.mod"))
	if err != nil || len(mods) < 3 {
		t.Fatalf("found %d service modules: %v", len(mods), err)
	}
	for _, mod := range mods {
		dir := filepath.Dir(mod)
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}}", "all")
		cmd.Dir = dir
		cmd.Env = append(cmd.Environ(), "GOWORK=off")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: go list -m all: %v", dir, err)
		}
		lines := strings.Fields(string(out))
		self := lines[0]
		for _, m := range lines[1:] {
			if !strings.HasPrefix(m, "github.com/oncemall/oncemall/services/") {
				continue
			}
			if self == "github.com/oncemall/oncemall/services/payment" && m == simulator {
				continue
			}
			t.Errorf("%s requires %s: a service's module requires no other service's", self, m)
		}
	}
}
