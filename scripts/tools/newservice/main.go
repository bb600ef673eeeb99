// Command newservice creates a service from the service template and wires
// it into the repository, so that every test passes right after it ran:
//
//	make new-service NAME=inventory [PORT=8084]
//	go run ./scripts/tools/newservice -name inventory [-port 8084]
//
// It writes services/<name>/ (the shape of docs/service-shape.md: an Item
// with a name and a quantity, created over HTTP with an <name>.item_created
// event through the outbox, counted into a totals row by the service's own
// consumer through the inbox, and reported to a peer by a job; built by
// internal/assembly, with a lab/ and a test kit) and pkg/events/<name>.go (the subject and
// body of that event), then adds the service to go.work, the Makefile's
// MODULES and SERVICES, scripts/run.sh, docker-compose.yml and
// docs/configuration.md, and runs go mod tidy and go build in the new
// module. Nothing is written unless every edit finds its anchor, and a
// failure after writing puts every file back as it was.
//
// NAME is lowercase letters and digits, starting with a letter, and names
// no existing service, Go keyword, predeclared identifier or package the
// template imports. PORT defaults to the one after the highest Port a
// service declares (in internal/assembly or cmd/*/main.go; 8084 when none does),
// skipping ports docker-compose.yml publishes.
//
// The templates are the files under template/ (with a .tmpl suffix, so
// that Go tooling ignores them; NAME in a path is the service's name) and
// the insertions under insert/, rendered with text/template. docs/forking.md
// says what to change once the service exists.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

func main() {
	name := flag.String("name", "", "the new service's name (lowercase letters and digits, starting with a letter)")
	port := flag.Int("port", 0, "its HTTP port (default: the next free one after the highest a service declares)")
	flag.Parse()
	if err := run(*name, *port); err != nil {
		fmt.Fprintln(os.Stderr, "newservice:", err)
		os.Exit(1)
	}
}

func run(name string, port int) error {
	root, err := composecheck.Root()
	if err != nil {
		return err
	}
	s, edited, err := Generate(root, name, port, goCommand())
	if err != nil {
		return err
	}
	fmt.Printf("created services/%s (port %d) and pkg/events/%s.go, and wired it in:\n", s.Name, s.Port, s.Name)
	for _, f := range edited {
		fmt.Printf("  edited %s\n", f)
	}
	fmt.Printf("next: cd services/%s && go test ./...\n", s.Name)
	return nil
}

// goCommand is the go command to run: $GO when set (the Makefile's GO), or
// go from the PATH.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}
