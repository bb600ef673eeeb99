package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// brokenRecords is the broken handler's record table: lab schema (Schema),
// payment_transaction without its unique key.
const brokenRecords = "payment_transaction_broken"

// BrokenPaid is the callback handler of incident 2, kept to reproduce it
// (PAYMENT_CALLBACK_MODE=broken, the lab only; never the default); the fix
// it stands beside is handlePaidFixed in internal/app/handle_paid.go. It
// runs four SQL statements, each committed on its own with no transaction
// around them: a SELECT of the payment (then, in Go, a check that it is
// still WAIT_PAY), an INSERT of a payment record into
// payment_transaction_broken, a table without a unique key, an UPDATE that
// sets the payment PAID with no condition on its status, and an INSERT of
// the payment.succeeded event into the outbox.
//
// What breaks: when the platform delivers the same notification several
// times at once (a retry storm), every copy reads WAIT_PAY before any of
// them has written PAID, so every copy inserts its own payment record and
// its own event, under a fresh message number that no consumer can
// recognise as a repeat, and downstream the order is processed once per
// copy. A late retry that arrives after PAID is caught by the status check,
// which is why the bug hides in single-threaded tests. It also never
// compares the amount.
//
// It refuses to start on a database without payment_transaction_broken:
// apply Schema after the service's migrations.
func BrokenPaid(d assembly.PaidDeps) (app.PaidHandler, error) {
	var n int
	err := d.DB.Raw(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, brokenRecords).Scan(&n).Error
	switch {
	case err != nil:
		return nil, fmt.Errorf("look for %s: %w", brokenRecords, err)
	case n == 0:
		return nil, fmt.Errorf("the broken callback handler writes %s, lab schema that the service's migrations do not create: apply services/payment/lab/migrations to database %s first",
			brokenRecords, d.DB.Migrator().CurrentDatabase())
	}
	d.Log.Warn("payment callback handler is the BROKEN variant of incident 2: duplicate notifications record duplicate payments")
	return brokenPaid{d}, nil
}

type brokenPaid struct{ d assembly.PaidDeps }

func (brokenPaid) Variant() variant.Mode { return variant.Broken }

func (b brokenPaid) HandlePaid(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
	fail := func(err error) (payment.Outcome, error) {
		return "", fmt.Errorf("handle notification %s (broken): %w", t.PlatformSerial, err)
	}
	p, err := b.d.Store.Get(ctx, t.OutTradeNo)
	if err != nil {
		return fail(err)
	}
	if p.Status != payment.StatusWaitPay {
		return payment.Duplicate, nil
	}
	// The window: between the read above and the update below, every
	// concurrent copy still sees WAIT_PAY.
	db, now := b.d.DB.WithContext(ctx), time.Now().UTC()
	if err := db.Exec(`INSERT INTO `+brokenRecords+` (channel, platform_serial, out_trade_no, amount, paid_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, t.Channel, t.PlatformSerial, t.OutTradeNo, t.Amount, t.PaidAt.UTC(), now).Error; err != nil {
		return fail(err)
	}
	if err := db.Exec(`UPDATE payments SET status = ?, channel = ?, platform_serial = ?, paid_at = ?, updated_at = ? WHERE out_trade_no = ?`,
		string(payment.StatusPaid), t.Channel, t.PlatformSerial, t.PaidAt.UTC(), now, t.OutTradeNo).Error; err != nil {
		return fail(err)
	}
	// No message number: the outbox gives every call a fresh one, as naive
	// code does, so every copy's event is a distinct message to the stream
	// and to the consumers.
	msg, err := outbox.JSON("", events.PaymentSucceeded, app.PaymentSucceeded(p, t))
	if err != nil {
		return fail(err)
	}
	msgs := []outbox.Message{msg}
	if err := outbox.Add(db, msgs...); err != nil {
		return fail(err)
	}
	b.d.Send(msgs...)
	return payment.Processed, nil
}
