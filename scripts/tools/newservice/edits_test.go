package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

var inventory = newService("inventory", 8084, "1.26.0")

// probeName returns a service name the repository around the test does not
// use yet: "inventory", unless a user has generated one of that name (their
// `make test` must keep passing), then "inventory2" and on.
func probeName(t *testing.T) string {
	t.Helper()
	root := composecheck.RepoRoot(t)
	for i := 1; ; i++ {
		name := "inventory"
		if i > 1 {
			name = fmt.Sprint(name, i)
		}
		if _, err := os.Stat(filepath.Join(root, "services", name)); err == nil {
			continue
		}
		taken := false
		for _, e := range edits {
			if strings.Contains(repoFile(t, e.path), name) {
				taken = true
			}
		}
		if !taken {
			return name
		}
	}
}

// repoFile reads a file of the repository around the test, whose anchors
// the edits must keep finding.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composecheck.RepoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEditsFindTheirAnchorsAndRefuseASecondRun: every edit applies to the
// repository's file as it is, changes it only by adding, and refuses the
// file it produced, so that generating a service twice changes nothing.
func TestEditsFindTheirAnchorsAndRefuseASecondRun(t *testing.T) {
	probe := newService(probeName(t), 8084, "1.26.0")
	for _, e := range edits {
		t.Run(e.path, func(t *testing.T) {
			src := repoFile(t, e.path)
			out, err := e.apply(src, probe)
			if err != nil {
				t.Fatal(err)
			}
			if !onlyAdds(src, out) {
				t.Error("the edit removed or reordered words of the file")
			}
			if !strings.Contains(out, probe.Name) {
				t.Error("the edit does not name the service")
			}
			if _, err := e.apply(out, probe); err == nil {
				t.Error("a second run was accepted")
			}
		})
	}
}

// onlyAdds reports whether after is before with words added: every word
// of before is still there, in order.
func onlyAdds(before, after string) bool {
	rest := strings.Fields(after)
	for _, w := range strings.Fields(before) {
		i := slices.Index(rest, w)
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
	return true
}

func TestAddToGoWorkKeepsTheUsesSorted(t *testing.T) {
	src := "go 1.26.0\n\nuse (\n\t./pkg\n\t./scripts\n\t./services/coupon\n\t./services/order\n)\n"
	want := "go 1.26.0\n\nuse (\n\t./pkg\n\t./scripts\n\t./services/coupon\n\t./services/inventory\n\t./services/order\n)\n"
	if out, err := addToGoWork(src, inventory); err != nil || out != want {
		t.Fatalf("addToGoWork = %q, %v; want %q", out, err, want)
	}
	last := newService("zoo", 8084, "1.26.0")
	if out, err := addToGoWork(src, last); err != nil || !strings.HasSuffix(out, "\t./services/order\n\t./services/zoo\n)\n") {
		t.Fatalf("a name sorting last: %q, %v", out, err)
	}
	if _, err := addToGoWork("go 1.26.0\n\nuse ./pkg\n", inventory); err == nil {
		t.Fatal("a go.work without a use block was accepted")
	}
}

func TestAddToMakefilePutsTheModuleBeforeScripts(t *testing.T) {
	src := "MODULES  := pkg services/order scripts\nSERVICES := order\nGO ?= go\n"
	want := "MODULES  := pkg services/order services/inventory scripts\nSERVICES := order inventory\nGO ?= go\n"
	if out, err := addToMakefile(src, inventory); err != nil || out != want {
		t.Fatalf("addToMakefile = %q, %v; want %q", out, err, want)
	}
	if out, err := addToMakefile("MODULES := pkg scripts\nSERVICES :=\n", inventory); err != nil || out != "MODULES := pkg services/inventory scripts\nSERVICES := inventory\n" {
		t.Fatalf("with no service yet: %q, %v", out, err)
	}
	if _, err := addToMakefile("MODULES := pkg scripts\n", inventory); err == nil || !strings.Contains(err.Error(), "SERVICES") {
		t.Fatalf("a Makefile without SERVICES: %v", err)
	}
}

func TestAddToRunScriptAfterTheLastService(t *testing.T) {
	src := `programs() {
  echo "proxy|scripts/tools/proxy|http://127.0.0.1:1/healthz|"
  echo "order|services/order/cmd/order|http://127.0.0.1:8081/readyz|HTTP_ADDR=:8081"
  if true; then :; fi
}

build() {
  echo "x|services/x|"
}
`
	out, err := addToRunScript(src, inventory)
	if err != nil {
		t.Fatal(err)
	}
	want := `HTTP_ADDR=:8081"
  echo "inventory|services/inventory/cmd/inventory|http://127.0.0.1:8084/readyz|HTTP_ADDR=:8084 MYSQL_DATABASE=oncemall_inventory"
  if true`
	if !strings.Contains(out, want) {
		t.Fatalf("addToRunScript = %s", out)
	}
	if _, err := addToRunScript("programs() {\n  echo \"proxy|scripts/tools/proxy|\"\n}\n", inventory); err == nil {
		t.Fatal("a programs() without a service line was accepted")
	}
}

func TestAddToComposeEndsTheServicesSection(t *testing.T) {
	src := `x-env: &platform-env
  A: "1"
x-timing: &healthcheck-timing
  interval: 5s
x-deps: &depends-on-infra
  db:
    condition: service_healthy
services:
  db:
    image: db
    environment:
      MYSQL_ROOT_PASSWORD: "r"
      MYSQL_ORDER_PASSWORD: "o"
  nats:
    image: nats
    environment:
      NATS_ORDER_PASSWORD: "o"
      NATS_ADMIN_PASSWORD: "a"

# The volumes.
volumes:
  data:
`
	out, err := addToCompose(src, inventory)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "NATS_ADMIN_PASSWORD: \"a\"\n\n  inventory:\n") || !strings.Contains(out, "depends_on: *depends-on-infra\n\n# The volumes.\nvolumes:\n") {
		t.Fatalf("the block is not the last service, a paragraph of its own:\n%s", out)
	}
	if err := checkCompose([]byte(out), "inventory"); err != nil {
		t.Fatal(err)
	}
	// Its passwords reach the servers that check them, after the other
	// services' and not after root's or admin's.
	for _, want := range []string{
		"MYSQL_ORDER_PASSWORD: \"o\"\n      MYSQL_INVENTORY_PASSWORD: \"${MYSQL_INVENTORY_PASSWORD:-dev-mysql-inventory-password}\"\n",
		"NATS_ORDER_PASSWORD: \"o\"\n      NATS_INVENTORY_PASSWORD: \"${NATS_INVENTORY_PASSWORD:-dev-nats-inventory-password}\"\n      NATS_ADMIN",
		"MYSQL_PASSWORD: \"${MYSQL_INVENTORY_PASSWORD:-dev-mysql-inventory-password}\"",
		"- \"127.0.0.1:${INVENTORY_PORT:-8084}:8084\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("addToCompose lacks %q:\n%s", want, out)
		}
	}
	if _, err := addToCompose(strings.Replace(src, "&healthcheck-timing", "&timing", 1), inventory); err == nil || !strings.Contains(err.Error(), "&healthcheck-timing") {
		t.Fatalf("a missing anchor: %v", err)
	}
	out, err = addToCompose("x: &platform-env {}\ny: &healthcheck-timing {}\nz: &depends-on-infra {}\nservices:\n  db:\n    image: db\n    environment:\n      MYSQL_A_PASSWORD: a\n      NATS_A_PASSWORD: a\n", inventory)
	if err != nil || !strings.Contains(out, "      NATS_INVENTORY_PASSWORD: \"${NATS_INVENTORY_PASSWORD:-dev-nats-inventory-password}\"\n\n  inventory:\n") || !strings.HasSuffix(out, "    depends_on: *depends-on-infra\n") {
		t.Fatalf("with services last in the file: %q, %v", out, err)
	}
}

func TestAddToConfigDocEndsTheEachServiceSection(t *testing.T) {
	src := "# Configuration\n\n## Every service\n\n| `A` | `1` | a |\n\n## Each service\n\nOrder:\n\n| `B` | `2` | b |\n\n## Later\n\ntext\n"
	out, err := addToConfigDoc(src, inventory)
	if err != nil {
		t.Fatal(err)
	}
	want := "| `B` | `2` | b |\n\nInventory service (see `services/inventory/README.md`; `HTTP_ADDR` defaults to `:8084`):\n\n| variable | default | meaning |\n|---|---|---|\n| `INVENTORY_MAX_QUANTITY` | `1000000` | largest quantity an item may be created with |\n| `INVENTORY_PEER_URL` | `http://127.0.0.1:8099` | base URL of the peer the totals are reported to |\n| `INVENTORY_PEER_TIMEOUT` | `3s` | timeout of a call to the peer |\n| `INVENTORY_REPORT_SCHEDULE` | `@every 1h` | cron spec of the inventory-report job that reports the totals to the peer |\n\n## Later\n"
	if !strings.Contains(out, want) {
		t.Fatalf("addToConfigDoc = %s", out)
	}
	rows, err := readmeRows(t, out)
	if err != nil || !strings.Contains(rows["INVENTORY_MAX_QUANTITY"], "`1000000`") {
		t.Fatalf("the drift test does not read the row: %v %v", rows, err)
	}
	if _, err := addToConfigDoc("# Configuration\n", inventory); err == nil {
		t.Fatal("a page without an Each service section was accepted")
	}
}

// readmeRows reads doc's variable rows as the drift test does.
func readmeRows(t *testing.T, doc string) (map[string]string, error) {
	p := filepath.Join(t.TempDir(), "configuration.md")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		return nil, err
	}
	return composecheck.ReadmeRows(p)
}
