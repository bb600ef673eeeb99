// Package migrations embeds the identity service's schema migrations.
package migrations

import (
	"embed"

	"github.com/oncemall/oncemall/pkg/migrate"
)

//go:embed *.sql
var files embed.FS

// Source is the identity service's own migration set.
var Source = migrate.Source{Name: "identity", FS: files}
