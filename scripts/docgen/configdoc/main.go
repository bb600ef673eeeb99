// Command configdoc prints the docs/configuration.md rows of the settings
// every service shares (platform.Config), from the same struct tags the
// services read, so the table is regenerated instead of retyped:
//
//	go run ./scripts/docgen/configdoc          print the rows
//	go run ./scripts/docgen/configdoc -w       rewrite them in docs/configuration.md
//
// Service-specific settings live in each service's internal config package,
// which this module cannot import; their rows are kept by hand, and the
// drift test in each service (pkg/testkit/composecheck) checks every row.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// The markers around the generated rows in docs/configuration.md.
const (
	begin = "<!-- configdoc:begin -->\n"
	end   = "<!-- configdoc:end -->\n"
)

func main() {
	err := run(os.Stdout)
	if err == nil && len(os.Args) > 1 && os.Args[1] == "-w" {
		err = rewrite()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range config.Vars(&platform.Config{}) {
		def := "(empty)"
		switch {
		case v.Name == "HTTP_ADDR":
			def = "`:<port>` of the service"
		case v.Name == "MYSQL_DATABASE":
			def = "`oncemall_<service>`"
		case v.Default != "":
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, v.Usage)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// rewrite replaces the rows between the markers of docs/configuration.md.
func rewrite() error {
	root, err := composecheck.Root()
	if err != nil {
		return err
	}
	path := filepath.Join(root, "docs", "configuration.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(doc)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		return errors.New(path + " has no configdoc markers")
	}
	var rows strings.Builder
	if err := run(&rows); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text[:i+len(begin)]+rows.String()+text[j:]), 0o644)
}
