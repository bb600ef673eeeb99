package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestConfigurationPageHasTheGeneratedRows fails when the shared rows of
// docs/configuration.md differ from what configdoc prints (a changed
// default or meaning, a new setting).
func TestConfigurationPageHasTheGeneratedRows(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(composecheck.RepoRoot(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), begin+out.String()+end) {
		t.Error("docs/configuration.md lacks the generated rows between the configdoc markers: run go run ./scripts/docgen/configdoc -w")
	}
}
