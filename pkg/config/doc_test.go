package config_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestPackageDocExampleNamesNoRealVariable keeps the package comment's
// example neutral. A variable a program really reads (the README's
// configuration tables list every one, checked by composecheck), or one
// that looks like a service's own, would make the example read as that
// variable's documentation, with a meaning it does not have.
func TestPackageDocExampleNamesNoRealVariable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`env:"([A-Z0-9_]+)"`).FindAllStringSubmatch(f.Doc.Text(), -1)
	if len(names) == 0 {
		t.Fatal("the package comment has no env:\"NAME\" example")
	}
	root := composecheck.RepoRoot(t)
	vars, err := composecheck.ReadmeRows(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range names {
		name := m[1]
		if _, ok := vars[name]; ok {
			t.Errorf("the package comment's example uses %s, a real variable: %s", name, vars[name])
		}
		for _, svc := range []string{"ORDER_", "COUPON_", "PAYMENT_"} {
			if strings.HasPrefix(name, svc) {
				t.Errorf("the package comment's example uses %s, which reads as a variable of a service", name)
			}
		}
	}
}
