// Package migrations embeds the order service's schema migrations.
package migrations

import (
	"embed"

	"github.com/oncemall/oncemall/pkg/migrate"
)

//go:embed *.sql
var files embed.FS

// Source is the order service's own migration set.
var Source = migrate.Source{Name: "order", FS: files}
