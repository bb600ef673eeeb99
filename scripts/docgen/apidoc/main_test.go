package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestReadmesHaveTheGeneratedTables fails when an endpoint table in a
// service's README differs from what apidoc makes of its document (a
// route, status or description changed in docs/api and not in the README,
// or the README edited by hand), and when a document has no table.
func TestReadmesHaveTheGeneratedTables(t *testing.T) {
	root := composecheck.RepoRoot(t)
	readmes, err := Readmes(root)
	if err != nil {
		t.Fatal(err)
	}
	var tabled []string
	for _, path := range readmes {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Regenerate(root, string(text))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if string(text) != want {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s: an endpoint table differs from its document in docs/api: run go run ./scripts/docgen/apidoc -w", rel)
		}
		tabled = append(tabled, Documents(string(text))...)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "api", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if !slices.Contains(tabled, filepath.Base(d)) {
			t.Errorf("docs/api/%s has no table in any services/*/README.md (a %s%s --> marker)", filepath.Base(d), beginPrefix, filepath.Base(d))
		}
	}
}

// TestRegenerateReplacesOnlyBetweenTheMarkers: the text around the
// markers is kept byte for byte, and each table is its document's.
func TestRegenerateReplacesOnlyBetweenTheMarkers(t *testing.T) {
	root := composecheck.RepoRoot(t)
	text := "# x\n\nbefore\n" + beginPrefix + "coupon.yaml -->\nstale\n" + end + "between\n" +
		beginPrefix + "psp-sim.yaml -->\n" + end + "after\n"
	got, err := Regenerate(root, text)
	if err != nil {
		t.Fatal(err)
	}
	coupon, err := Table(filepath.Join(root, "docs", "api", "coupon.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := Table(filepath.Join(root, "docs", "api", "psp-sim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# x\n\nbefore\n" + beginPrefix + "coupon.yaml -->\n" + coupon + end + "between\n" +
		beginPrefix + "psp-sim.yaml -->\n" + sim + end + "after\n"
	if got != want {
		t.Fatalf("Regenerate:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(coupon, "| `POST /internal/coupons/{id}/lock` | services (`INTERNAL_TOKEN`) |") {
		t.Fatalf("the coupon table lacks the lock row as expected:\n%s", coupon)
	}
	if _, err := Regenerate(root, beginPrefix+"coupon.yaml -->\nno end\n"); err == nil {
		t.Fatal("a begin marker without its end was accepted")
	}
}
