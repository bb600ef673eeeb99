// Package migrations embeds the lab's changes to the coupon schema: applied
// after the service's own migrations (services/coupon/migrations), in the
// lab's and the tests' databases only, they turn it into the schema incident
// 1 ran on. The service itself never applies them.
package migrations

import (
	"embed"

	"github.com/oncemall/oncemall/pkg/migrate"
)

//go:embed *.sql
var files embed.FS

// Source is the lab's migration set, recorded apart from the service's
// ("coupon-lab" in schema_migrations).
var Source = migrate.Source{Name: "coupon-lab", FS: files}
