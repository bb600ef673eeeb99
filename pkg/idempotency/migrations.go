package idempotency

import (
	"embed"
	"io/fs"

	"github.com/oncemall/oncemall/pkg/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations creates idempotency_record. Apply it with the service's own
// migrations: platform.Options{Migrations: []migrate.Source{svc, idempotency.Migrations}}.
var Migrations = migrate.Source{Name: "idempotency", FS: mustSub(migrationFiles, "migrations")}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		// Only a typo in the literal above can get here; the build embeds dir.
		panic(err)
	}
	return sub
}
