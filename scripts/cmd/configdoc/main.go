// Command configdoc prints the README configuration rows for the settings
// every service shares (platform.Config), from the same struct tags the
// services read, so the table can be regenerated instead of retyped:
//
//	go run ./scripts/cmd/configdoc
//
// Service-specific settings live in each service's internal config package,
// which this module cannot import; their rows are kept by hand, and the
// drift test in each service (pkg/testkit/composecheck) checks every row either way.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range config.Vars(&platform.Config{}) {
		def := "(empty)"
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, v.Usage)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
