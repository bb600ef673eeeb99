package migrations_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/migrations"
)

// TestUpDownUp applies every migration, rolls them all back and applies
// them again, so each down file really undoes its up file.
func TestUpDownUp(t *testing.T) {
	db := testenv.DB(t)
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all, err := migrate.Load(migrations.Source)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Must(t, migrate.Up(ctx, sqlDB, migrations.Source))
	testenv.Must(t, migrate.Down(ctx, sqlDB, migrations.Source, len(all)))
	var tables int
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'payment%'").Scan(&tables).Error)
	if tables != 0 {
		t.Fatalf("%d payment tables left after rolling everything back", tables)
	}
	testenv.Must(t, migrate.Up(ctx, sqlDB, migrations.Source))
	// The schema's guards are in place: one payment per order, one record
	// per platform transaction.
	testenv.Must(t, db.Exec("INSERT INTO payments (out_trade_no, order_no, amount, status, created_at, updated_at) VALUES ('P1', 'O1', 1, 'WAIT_PAY', NOW(), NOW())").Error)
	if err := db.Exec("INSERT INTO payments (out_trade_no, order_no, amount, status, created_at, updated_at) VALUES ('P2', 'O1', 1, 'WAIT_PAY', NOW(), NOW())").Error; err == nil {
		t.Fatal("a second payment for the same order was accepted")
	}
	ins := "INSERT INTO %s (channel, platform_serial, out_trade_no, amount, paid_at, created_at) VALUES ('c', 'T1', 'P1', 1, NOW(), NOW())"
	testenv.Must(t, db.Exec(fmt.Sprintf(ins, "payment_transaction")).Error)
	if err := db.Exec(fmt.Sprintf(ins, "payment_transaction")).Error; err == nil {
		t.Fatal("a second record of the same platform transaction was accepted")
	}
	// The broken handler's table is lab schema (services/payment/lab): the
	// production migrations never create a record table without the key.
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'payment_transaction_broken'").Scan(&tables).Error)
	if tables != 0 {
		t.Fatal("the production migrations create payment_transaction_broken, the lab's table without a unique key")
	}
}
