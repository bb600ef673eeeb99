package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// HandlePaidBroken is the callback handler of incident 2, kept to reproduce
// it (PAYMENT_CALLBACK_MODE=broken; never the default). It reads the
// payment, checks that it is still WAIT_PAY, inserts a payment record into a
// table without a unique key, sets the payment PAID and writes the
// payment.succeeded event: five separate statements, no transaction, no
// conditional update.
//
// What breaks: when the platform delivers the same notification several
// times at once (a retry storm), every copy reads WAIT_PAY before any of
// them has written PAID, so every copy inserts its own payment record and
// its own event, and downstream the order is processed once per copy. A late
// retry that arrives after PAID is caught by the status check, which is why
// the bug hides in single-threaded tests. It also never compares the amount.
func (a *App) HandlePaidBroken(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
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
	body, err := json.Marshal(events.PaymentSucceededV1{
		PaymentNo: p.OutTradeNo, OrderNo: p.OrderNo, Amount: t.Amount,
		Channel: t.Channel, PlatformSerial: t.PlatformSerial, PaidAt: t.PaidAt.UTC(),
	})
	if err != nil {
		return "", fmt.Errorf("handle notification %s (broken): encode event: %w", t.PlatformSerial, err)
	}
	// A fresh message number per call, as naive code does: every copy's
	// event is a distinct message to the stream and to the consumers.
	if err := a.store.AddEvent(ctx, payment.Event{Subject: a.cfg.SubjectPrefix + events.PaymentSucceeded, Body: body}); err != nil {
		return "", fmt.Errorf("handle notification %s (broken): %w", t.PlatformSerial, err)
	}
	a.wake()
	return payment.Processed, nil
}
