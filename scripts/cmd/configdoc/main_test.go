package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestREADMEHasTheGeneratedRows fails when a shared setting's row in the
// README differs from what configdoc prints (a changed default or meaning).
func TestREADMEHasTheGeneratedRows(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	root := composecheck.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range strings.Split(strings.TrimSpace(out.String()), "\n")[2:] {
		if !strings.Contains(string(readme), row+"\n") {
			t.Errorf("README.md lacks the row (regenerate with go run ./scripts/cmd/configdoc):\n%s", row)
		}
	}
}
