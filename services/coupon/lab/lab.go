// Package lab holds the scenarios of incident 1, the lost COMMIT
// acknowledgement, for both of their front ends: this package's tests, which
// assert that the broken deduction reproduces the incident and the fixed one
// holds, and the `make lab` runner, which prints the same results.
//
// Every scenario builds a fresh coupon database on the incident's schema
// (the lab's own migration, lab/migrations, takes the ledger's per-order
// unique key away), issues one coupon, locks it for an order as the order
// service does when the order is placed, lands that order's order.paid
// message, injects a failure, runs the deduction (LOCKED -> USED) as the
// service would, and counts the ledger rows of the order in the database. The invariant is one deduction
// per order. Walkthrough: docs/incidents/
// (incident 1); the code under test is this package's deduct_broken.go
// beside services/coupon/internal/app/deduct_fixed.go.
package lab

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/lab/fault"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	labmigrations "github.com/oncemall/oncemall/services/coupon/lab/migrations"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// Incident is the incident number these scenarios reproduce.
const Incident = 1

const title = "lost commit ACK"

// ConcurrentRetries is how many retries of one message race in the
// concurrency scenario.
const ConcurrentRetries = 20

// LostAckBrokenCount is what the broken deduction writes for one order after
// one lost acknowledgement: the attempt that committed unheard, and the
// scheduled retry that deducts again. The incident is exactly this count.
const LostAckBrokenCount = 2

// Scenarios lists the variants of incident 1.
func Scenarios() []lab.Scenario {
	var out []lab.Scenario
	for _, mode := range app.DeductionModes {
		name, holds, lostAckCount := lab.Fixed, true, 0
		if mode == variant.Broken {
			name, holds, lostAckCount = lab.Broken, false, LostAckBrokenCount
		}
		out = append(out,
			lab.Scenario{Incident: Incident, Variant: name + "/driver", WantHolds: holds, WantCount: lostAckCount,
				Run: func(ctx context.Context, env lab.Env) (lab.Result, error) { return LostAckDriver(ctx, env, mode) }},
			lab.Scenario{Incident: Incident, Variant: name + "/proxy", WantHolds: holds, WantCount: lostAckCount,
				Run: func(ctx context.Context, env lab.Env) (lab.Result, error) { return LostAckProxy(ctx, env, mode) }},
			lab.Scenario{Incident: Incident, Variant: name + "/concurrent", WantHolds: holds,
				Run: func(ctx context.Context, env lab.Env) (lab.Result, error) {
					return ConcurrentRetry(ctx, env, mode, ConcurrentRetries)
				}},
			lab.Scenario{Incident: Incident, Variant: name + "/concurrent-orders", WantHolds: holds,
				Run: func(ctx context.Context, env lab.Env) (lab.Result, error) {
					return ConcurrentOrders(ctx, env, mode, RivalOrders)
				}},
		)
		if mode == variant.Broken {
			// The control of broken/concurrent-orders: the broken code
			// without the race holds.
			out = append(out, lab.Scenario{Incident: Incident, Variant: name + "/sequential-orders", WantHolds: true,
				Run: func(ctx context.Context, env lab.Env) (lab.Result, error) {
					return SequentialOrders(ctx, env, mode, RivalOrders)
				}})
		}
	}
	return out
}

// Fixture is one scenario's coupon database with one coupon and one landed
// order.paid message for it.
type Fixture struct {
	DB      *gorm.DB
	App     *app.App
	Store   *store.Store
	Coupon  coupon.Coupon
	Message coupon.Message
	Close   func()
}

// Setup opens a fresh coupon database on env (with env.MySQL as given, so a
// caller can route it through a fault driver or proxy first), builds the use
// cases in mode with retries due almost at once, and lands one message.
//
// Every variant runs on the incident's schema (labmigrations: the ledger
// without its per-order unique key), so that the broken and the fixed
// deduction differ by their code alone: the broken one reproduces the
// incident instead of being refused by the key, and the fixed one holds
// without it.
func Setup(ctx context.Context, env lab.Env, suffix string, mode variant.Mode) (*Fixture, error) {
	var cfg config.Config
	if err := pkgconfig.LoadFrom(&cfg, func(string) (string, bool) { return "", false }); err != nil {
		return nil, err
	}
	// The scheduled retry is made due after a millisecond, so the lab does
	// not wait for the production backoff.
	cfg.RetryMax, cfg.RetryBackoff, cfg.RetryBackoffMax = 5, time.Millisecond, time.Millisecond
	db, drop, err := env.OpenDB(ctx, suffix, migrations.Source, outbox.Migrations, labmigrations.Source)
	if err != nil {
		return nil, err
	}
	p, err := assembly.UseCases(db, cfg, assembly.Options{Deducer: Deducer(mode), Orders: noOrderService{}},
		env.Log, prometheus.NewRegistry(), nil)
	if err != nil {
		drop()
		return nil, err
	}
	a, st := p.App, p.Store
	f := &Fixture{DB: db, App: a, Store: st, Close: drop}
	if f.Coupon, f.Message, err = Seed(ctx, a, st, "order-"+suffix, 1001); err != nil {
		drop()
		return nil, err
	}
	return f, nil
}

// noOrderService is the lab's app.Orders. Incident 1's scenarios never
// sweep locks, so no order service runs beside them; were it asked, it would
// answer unavailable, which leaves every lock alone.
type noOrderService struct{}

func (noOrderService) OrderState(context.Context, string) (coupon.OrderState, error) {
	return "", fmt.Errorf("%w: the lab runs no order service", coupon.ErrOrderServiceUnavailable)
}

// OrderAmount is the total of the lab's orders, above the coupon's discount.
const OrderAmount = 5000

// Seed issues a coupon to userID, locks it for orderNo as the order service
// does when the order is placed, and lands the order.paid message of that
// order, as the inbox consumer would once it is paid.
func Seed(ctx context.Context, a *app.App, st *store.Store, orderNo string, userID uint64) (coupon.Coupon, coupon.Message, error) {
	t, err := a.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	if err != nil {
		return coupon.Coupon{}, coupon.Message{}, err
	}
	c, err := a.IssueCoupon(ctx, t.ID, userID)
	if err != nil {
		return coupon.Coupon{}, coupon.Message{}, err
	}
	if _, err := a.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: orderNo, UserID: userID, OrderAmount: OrderAmount}); err != nil {
		return coupon.Coupon{}, coupon.Message{}, err
	}
	m, err := Land(ctx, a, st, "msg-"+orderNo, orderNo, userID, c.ID)
	return c, m, err
}

// Land lands one order.paid message and returns it as stored.
func Land(ctx context.Context, a *app.App, st *store.Store, messageID, orderNo string, userID, couponID uint64) (coupon.Message, error) {
	err := st.InTx(ctx, func(tx coupon.Tx) error {
		return a.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: messageID, OrderNo: orderNo, UserID: userID, CouponID: couponID})
	})
	if err != nil {
		return coupon.Message{}, fmt.Errorf("land message: %w", err)
	}
	var id uint64
	if err := st.DB().WithContext(ctx).Table("coupon_message").Where("message_id = ?", messageID).Pluck("id", &id).Error; err != nil {
		return coupon.Message{}, err
	}
	return st.Message(ctx, id)
}

// CountDeductions counts the ledger rows of orderNo: the effect the
// invariant is about.
func CountDeductions(ctx context.Context, db *gorm.DB, orderNo string) (int, error) {
	var n int64
	err := db.WithContext(ctx).Table("coupon_deduction").Where("order_no = ?", orderNo).Count(&n).Error
	return int(n), err
}

// committedDespiteError checks that the injected failure is the incident's:
// the client got an error, yet the deduction is in the database.
func committedDespiteError(ctx context.Context, f *Fixture) error {
	n, err := CountDeductions(ctx, f.DB, f.Message.OrderNo)
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("after the lost COMMIT ack the ledger holds %d rows for the order, want the 1 that committed", n)
	}
	return nil
}

// drainRetries runs passes of the retry job, as the cron would, until no
// message is due any more (bounded, so a bug cannot loop forever). Each pass
// that claimed something goes on env's timeline as the retry job's.
func drainRetries(ctx context.Context, env lab.Env, a *app.App) error {
	for pass := range 10 {
		time.Sleep(5 * time.Millisecond) // past the lab's 1ms backoff
		start := time.Now()
		r, err := a.ProcessDueMessages(ctx)
		if err != nil {
			return err
		}
		if r.Claimed == 0 {
			if pass == 0 {
				env.Timeline.Span("retry job", lab.KindAbsorbed, "nothing due: the message is settled", start)
			}
			return nil
		}
		kind, label := lab.KindStep, fmt.Sprintf("retried %d", r.Claimed)
		switch {
		case r.Deducted > 0:
			kind, label = lab.KindEffect, fmt.Sprintf("retry deducted (%d)", r.Deducted)
		case r.Absorbed > 0:
			kind, label = lab.KindAbsorbed, fmt.Sprintf("retry absorbed (%d)", r.Absorbed)
		case r.Failed > 0:
			kind, label = lab.KindRefused, fmt.Sprintf("retry failed the message (%d)", r.Failed)
		}
		env.Timeline.Span("retry job", kind, label, start)
	}
	return nil
}

// recordAttempt puts one ProcessMessage call of actor on tl, coloured by
// what it did.
func recordAttempt(tl *lab.Timeline, actor string, out app.Outcome, err error, start time.Time) {
	kind, label := lab.KindStep, string(out)
	switch out {
	case app.Deducted:
		kind = lab.KindEffect
	case app.Absorbed:
		kind, label = lab.KindAbsorbed, "absorbed: already used by this order"
	case app.Failed:
		kind, label = lab.KindRefused, "message failed"
	case app.Retry:
		kind, label = lab.KindError, "error, retry scheduled"
	}
	if err != nil && out != app.Failed && out != app.Retry {
		kind, label = lab.KindError, "error: "+err.Error()
	}
	tl.Span(actor, kind, label, start)
}

func result(mode variant.Mode, sub, injected string, n int) lab.Result {
	name := lab.Fixed + "/" + sub
	if mode == variant.Broken {
		name = lab.Broken + "/" + sub
	}
	return lab.Result{Incident: Incident, Title: title, Variant: name, Injected: injected,
		Effect: "coupon_deduction rows of the order", Count: n, Expected: "= 1", Holds: n == 1}
}

// LostAckDriver loses the acknowledgement of the deduction's COMMIT with the
// fault-injecting database/sql driver (pkg/lab/fault), then lets the retry job
// run as it would in production.
func LostAckDriver(ctx context.Context, env lab.Env, mode variant.Mode) (lab.Result, error) {
	driverName := env.Name("fault_" + string(mode))
	inj, err := fault.Register(driverName)
	if err != nil {
		return lab.Result{}, err
	}
	env.MySQL.DriverName = driverName
	f, err := Setup(ctx, env, "i1_driver_"+string(mode), mode)
	if err != nil {
		return lab.Result{}, err
	}
	defer f.Close()

	env.Note("arming: the next COMMIT is applied and its acknowledgement lost")
	n, err := loseOneAckThenRetry(ctx, env, f, lostAck{
		arm:    func() { inj.LoseCommitAcks(1) },
		disarm: inj.Disarm,
		lost:   func() int64 { return inj.Stats().CommitAcksLost },
		what:   "lost COMMIT ack, injected",
	})
	if err != nil {
		return lab.Result{}, err
	}
	return result(mode, "driver", "1 lost COMMIT ACK (driver wrapper), then the scheduled retry", n), nil
}

// lostAck is one way of losing a COMMIT acknowledgement: the driver wrapper
// or the proxy.
type lostAck struct {
	arm, disarm func()
	lost        func() int64 // acknowledgements lost so far
	what        string       // names the count in an error
}

// loseOneAckThenRetry runs the first attempt at f's message with one COMMIT
// acknowledgement lost, checks that the attempt failed although its
// deduction committed, lets the scheduled retries run, and counts the
// order's deductions.
func loseOneAckThenRetry(ctx context.Context, env lab.Env, f *Fixture, la lostAck) (int, error) {
	if err := couponState(ctx, f, coupon.StatusLocked, f.Message.OrderNo); err != nil {
		return 0, fmt.Errorf("before the deduction: %w", err)
	}
	la.arm()
	start := time.Now()
	out, attemptErr := f.App.ProcessMessage(ctx, f.Message)
	end := time.Now()
	la.disarm()
	if got := la.lost(); got != 1 {
		return 0, fmt.Errorf("expected 1 %s %d (attempt error: %v)", la.what, got, attemptErr)
	}
	if attemptErr == nil {
		return 0, fmt.Errorf("the attempt did not see the lost COMMIT ack")
	}
	env.Note("first attempt saw: %v", attemptErr)
	if err := committedDespiteError(ctx, f); err != nil {
		return 0, err
	}
	// The attempt's COMMIT reached the server (the row is there) and its
	// answer did not reach the attempt.
	env.Timeline.Add(lab.Event{Actor: "first attempt", Kind: lab.KindEffect,
		Label: fmt.Sprintf("deducted, COMMIT sent; saw an error (%s)", out), Start: start, End: end})
	env.Timeline.Add(lab.Event{Actor: "MySQL", Kind: lab.KindFault, Label: "COMMIT applied, ACK lost", Start: end, End: end})
	if err := drainRetries(ctx, env, f.App); err != nil {
		return 0, err
	}
	if err := couponState(ctx, f, coupon.StatusUsed, f.Message.OrderNo); err != nil {
		return 0, fmt.Errorf("after the deduction: %w", err)
	}
	env.Timeline.MarkDuplicates(1)
	return CountDeductions(ctx, f.DB, f.Message.OrderNo)
}

// couponState checks that f's coupon is in status for orderNo (LOCKED by
// it before the deduction, USED by it after), so that a scenario runs the
// deduction on the states the service runs it on: an error of the
// scenario, not a verdict.
func couponState(ctx context.Context, f *Fixture, status coupon.Status, orderNo string) error {
	c, err := f.Store.Coupon(ctx, f.Coupon.ID)
	if err != nil {
		return err
	}
	holder := c.LockedOrderNo
	if status == coupon.StatusUsed {
		holder = c.UsedOrderNo
	}
	if c.Status != status || holder != orderNo {
		return fmt.Errorf("coupon %d is %s (locked by %q, used by %q), want %s by order %s",
			c.ID, c.Status, c.LockedOrderNo, c.UsedOrderNo, status, orderNo)
	}
	return nil
}

// ConcurrentRetry runs n attempts at the same message at once, as retries
// from several replicas (or a stale claim next to a fresh one) would.
//
// On the broken deduction it does not isolate the race: since a coupon USED
// by the same order is let through (the second flaw), the same n attempts
// one after another deduct n times too. ConcurrentOrders is the scenario
// whose only way to a second deduction is the check outside the
// transaction.
func ConcurrentRetry(ctx context.Context, env lab.Env, mode variant.Mode, n int) (lab.Result, error) {
	f, err := Setup(ctx, env, "i1_concurrent_"+string(mode), mode)
	if err != nil {
		return lab.Result{}, err
	}
	defer f.Close()

	env.Note("racing %d retries of message %s", n, f.Message.MessageID)
	processAtOnce(ctx, env, f.App, slices.Repeat([]coupon.Message{f.Message}, n), "retry")
	env.Timeline.MarkDuplicates(1)
	if err := couponState(ctx, f, coupon.StatusUsed, f.Message.OrderNo); err != nil {
		return lab.Result{}, fmt.Errorf("after the retries: %w", err)
	}
	count, err := CountDeductions(ctx, f.DB, f.Message.OrderNo)
	if err != nil {
		return lab.Result{}, err
	}
	return result(mode, "concurrent", fmt.Sprintf("%d concurrent retries of one message", n), count), nil
}

// processAtOnce releases one attempt at each of msgs at the same moment and
// waits for all of them. The attempts' outcomes are not looked at: the
// scenario's verdict is what the ledger holds afterwards.
//
// Each attempt goes on env's timeline as actor and its number.
func processAtOnce(ctx context.Context, env lab.Env, a *app.App, msgs []coupon.Message, actor string) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, m := range msgs {
		wg.Go(func() {
			<-start
			began := time.Now()
			out, err := a.ProcessMessage(ctx, m)
			recordAttempt(env.Timeline, fmt.Sprintf("%s %02d", actor, i+1), out, err, began)
		})
	}
	close(start)
	wg.Wait()
}
