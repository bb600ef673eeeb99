package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// handlePaidBroken is the callback handler of incident 2, kept to reproduce
// it (PAYMENT_CALLBACK_MODE=broken, the lab only; never the default). It
// runs four SQL statements, each committed on its own with no transaction
// around them: a SELECT of the payment (then, in Go, a check that it is
// still WAIT_PAY), an INSERT of a payment record into
// payment_transaction_broken, a lab table without a unique key, an UPDATE
// that sets the payment PAID with no condition on its status, and an INSERT
// of the payment.succeeded event into the outbox.
//
// What breaks: when the platform delivers the same notification several
// times at once (a retry storm), every copy reads WAIT_PAY before any of
// them has written PAID, so every copy inserts its own payment record and
// its own event, under a fresh message number that no consumer can
// recognise as a repeat, and downstream the order is processed once per
// copy. A late retry that arrives after PAID is caught by the status check,
// which is why the bug hides in single-threaded tests. It also never
// compares the amount.
func (a *App) handlePaidBroken(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
	p, err := a.store.Get(ctx, t.OutTradeNo)
	if err != nil {
		return "", fmt.Errorf("handle notification %s (broken): %w", t.PlatformSerial, err)
	}
	if p.Status != payment.StatusWaitPay {
		return payment.Duplicate, nil
	}
	// The window: between the read above and the update below, every
	// concurrent copy still sees WAIT_PAY.
	if err := a.store.InsertBrokenRecord(ctx, t); err != nil {
		return "", fmt.Errorf("handle notification %s (broken): %w", t.PlatformSerial, err)
	}
	if err := a.store.SetPaid(ctx, t); err != nil {
		return "", fmt.Errorf("handle notification %s (broken): %w", t.PlatformSerial, err)
	}
	// No ID: the outbox gives every call a fresh message number, as naive
	// code does, so every copy's event is a distinct message to the stream
	// and to the consumers.
	if err := a.store.AddEvent(ctx, events.Event{Subject: events.PaymentSucceeded, Payload: paymentSucceeded(p, t)}); err != nil {
		return "", fmt.Errorf("handle notification %s (broken): %w", t.PlatformSerial, err)
	}
	return payment.Processed, nil
}
