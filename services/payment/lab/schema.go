package lab

import (
	"embed"
	"io/fs"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/payment/migrations"
)

//go:embed migrations/*.sql
var schemaFiles embed.FS

// Schema is the lab-only schema: payment_transaction_broken, the record
// table of the broken callback handler, which has no unique key. It is a
// migration source of its own (recorded as "payment_lab") so that the
// service's migrations stay the production schema; apply it, after them, to
// any database the broken handler writes to.
var Schema = migrate.Source{Name: "payment_lab", FS: mustSub(schemaFiles, "migrations")}

// Migrations are the sources a rig's database needs: the service's own, the
// outbox's, the inbox's (the order.cancelled consumer), the idempotency
// records', and the lab schema, so that a rig can run either handler.
var Migrations = []migrate.Source{migrations.Source, outbox.Migrations, inbox.Migrations, idempotency.Migrations, Schema}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		// Only a typo in the literal above can get here; the build embeds dir.
		panic(err)
	}
	return sub
}
