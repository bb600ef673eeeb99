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
