package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

func TestCheckName(t *testing.T) {
	for _, name := range []string{"inventory", "stock2", "a", strings.Repeat("a", maxNameLen)} {
		if err := checkName(name); err != nil {
			t.Errorf("checkName(%q) = %v, want it accepted", name, err)
		}
	}
	for name, why := range map[string]string{
		"":                                "required",
		"Inventory":                       "lowercase",
		"2nd":                             "starting with a letter",
		"in-ventory":                      "lowercase letters and digits",
		"in_ventory":                      "lowercase letters and digits",
		strings.Repeat("a", maxNameLen+1): "longer than",
		"func":                            "keyword",
		"type":                            "keyword",
		"string":                          "predeclared",
		"len":                             "predeclared",
		"app":                             "package", // a directory of the shape
		"store":                           "package", // a directory of the shape
		"jobs":                            "package", // a directory of the shape, not yet in the template
		"gin":                             "package", // imported by the template
		"events":                          "package", // imported by the template
		"nats":                            "package", // imported as github.com/nats-io/nats.go
		"time":                            "package", // imported by the template
		"main":                            "package",
	} {
		if err := checkName(name); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("checkName(%q) = %v, want an error saying %q", name, err, why)
		}
	}
}

// fakeRepo returns a repository with one service declaring port 8084 and
// a compose file publishing 8085 (movable, as compose publishes) and 8090.
func fakeRepo(t *testing.T) (string, *composecheck.File) {
	t.Helper()
	root := t.TempDir()
	write(t, root, "services/stock/cmd/stock/main.go", "package main\n\nvar service = platform.Service[config.Config]{\n\tName: \"stock\",\n\tPort: 8084,\n}\n")
	write(t, root, "pkg/events/stock.go", "package events\n")
	write(t, root, "docker-compose.yml", `services:
  stock:
    ports:
      - "8084:8084"
  other:
    ports:
      - "127.0.0.1:${OTHER_PORT:-8085}:8085"
  psp-sim:
    ports:
      - "8090:8090/tcp"
`)
	compose, err := composecheck.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, compose
}

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckNameFree(t *testing.T) {
	root, compose := fakeRepo(t)
	if err := checkNameFree(root, "inventory", compose); err != nil {
		t.Fatalf("a new name: %v", err)
	}
	for name, why := range map[string]string{"stock": "services/stock exists", "other": "docker-compose.yml has a service"} {
		if err := checkNameFree(root, name, compose); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("checkNameFree(%q) = %v, want an error saying %q", name, err, why)
		}
	}
	if err := os.RemoveAll(filepath.Join(root, "services", "stock")); err != nil {
		t.Fatal(err)
	}
	if err := checkNameFree(root, "stock", &composecheck.File{}); err == nil || !strings.Contains(err.Error(), "pkg/events/stock.go exists") {
		t.Errorf("a name whose event file exists: %v", err)
	}
}

func TestChoosePort(t *testing.T) {
	root, compose := fakeRepo(t)
	if p, err := choosePort(root, 0, compose); err != nil || p != 8086 {
		t.Errorf("default port = %d, %v; want 8086: after the declared 8084, skipping the published 8085", p, err)
	}
	if p, err := choosePort(root, 9000, compose); err != nil || p != 9000 {
		t.Errorf("PORT=9000: %d, %v", p, err)
	}
	for port, why := range map[int]string{8084: "services/stock/cmd/stock/main.go", 8085: "docker-compose.yml's other", 8090: "psp-sim", 80: "1024 to 65535", 70000: "1024 to 65535"} {
		if _, err := choosePort(root, port, compose); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("PORT=%d: %v, want an error saying %q", port, err, why)
		}
	}
	empty := t.TempDir()
	write(t, root, "services/shop/internal/assembly/assembly.go", "package assembly\n\nfunc Definition() {\n\treturn platform.Service[config.Config]{\n\t\tPort:       8091,\n\t}\n}\n")
	if p, err := choosePort(root, 0, compose); err != nil || p != 8092 {
		t.Errorf("after a service whose assembly declares 8091: %d, %v; want 8092", p, err)
	}
	if p, err := choosePort(empty, 0, &composecheck.File{}); err != nil || p != minPort {
		t.Errorf("with no service declaring a port: %d, %v; want %d", p, err, minPort)
	}
}
