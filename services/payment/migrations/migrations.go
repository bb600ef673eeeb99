// Package migrations embeds the payment service's schema migrations.
package migrations

import (
	"embed"

	"github.com/oncemall/oncemall/pkg/migrate"
)

//go:embed *.sql
var files embed.FS

// Source is the payment service's own migration set.
var Source = migrate.Source{Name: "payment", FS: files}
