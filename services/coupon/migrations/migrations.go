// Package migrations embeds the coupon service's schema migrations.
package migrations

import (
	"embed"

	"github.com/oncemall/oncemall/pkg/migrate"
)

//go:embed *.sql
var files embed.FS

// Source is the coupon service's own migration set.
var Source = migrate.Source{Name: "coupon", FS: files}
