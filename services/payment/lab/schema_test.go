package lab_test

import (
	"context"
	"testing"

	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/payment/migrations"
)

// TestSchemaUpDownUp: the lab schema applies after the service's
// migrations, rolls back and applies again, and its table records a
// notification twice, which is what the broken handler needs and what the
// production table's unique key forbids.
func TestSchemaUpDownUp(t *testing.T) {
	db := testenv.DB(t, migrations.Source)
	sqlDB, err := db.DB()
	testenv.Must(t, err)
	ctx := context.Background()
	testenv.Must(t, migrate.Up(ctx, sqlDB, paymentlab.Schema))
	testenv.Must(t, migrate.Down(ctx, sqlDB, paymentlab.Schema, 1))
	var tables int
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'payment_transaction_broken'").Scan(&tables).Error)
	if tables != 0 {
		t.Fatal("payment_transaction_broken is left after rolling the lab schema back")
	}
	testenv.Must(t, migrate.Up(ctx, sqlDB, paymentlab.Schema))
	ins := "INSERT INTO payment_transaction_broken (channel, platform_serial, out_trade_no, amount, paid_at, created_at) VALUES ('c', 'T1', 'P1', 1, NOW(), NOW())"
	testenv.Must(t, db.Exec(ins).Error)
	testenv.Must(t, db.Exec(ins).Error)
}
