package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
	labmigrations "github.com/oncemall/oncemall/services/coupon/lab/migrations"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

var ctx = context.Background()

type fixture struct {
	app    *app.App
	clock  *testClock
	store  *store.Store
	reg    *prometheus.Registry
	tpl    coupon.Template
	orders *orderService
	// cfg and o are what the use cases were assembled with.
	cfg config.Config
	o   assembly.Options
}

// fastRetries are the settings of retries due after a millisecond, three
// attempts at most.
var fastRetries = map[string]string{"COUPON_RETRY_MAX": "3", "COUPON_RETRY_BACKOFF": "1ms", "COUPON_RETRY_BACKOFF_MAX": "1ms"}

func newFixture(t *testing.T, mode variant.Mode) *fixture {
	t.Helper()
	return newFixtureOn(t, mode, nil)
}

func newFixtureB(b *testing.B, mode variant.Mode) *fixture {
	b.Helper()
	return newFixtureOn(b, mode, nil)
}

// newFixtureOn builds the use cases with mode's deduction and fast retries
// on a fresh database, through wrap when given. The broken deduction runs
// on the incident's schema (the lab's migration), without the per-order
// key that would refuse its second ledger row, as the lab runs it; the
// fixed one on the service's own.
func newFixtureOn(t testing.TB, mode variant.Mode, wrap func(*store.Store) coupon.Store) *fixture {
	t.Helper()
	sources := []migrate.Source{migrations.Source, outbox.Migrations}
	if mode == variant.Broken {
		sources = append(sources, labmigrations.Source)
	}
	return newFixtureWith(t, testenv.DB(t, sources...), coupontest.Settings(t, fastRetries),
		assembly.Options{Deducer: couponlab.Deducer(mode), Store: wrap})
}

// newFixtureWith builds the use cases through the assembly over db, on cfg
// with o's substitutions, and an order service (an httptest server
// speaking the contract) for the sweeper.
func newFixtureWith(t testing.TB, db *gorm.DB, cfg config.Config, o assembly.Options) *fixture {
	t.Helper()
	return newFixtureWithOrders(t, db, cfg, o, newOrderService(t))
}

// newFixtureWithOrders is newFixtureWith whose sweeper asks orders through
// its client, unless o.Orders reaches it another way (a forwarder) or not
// at all.
func newFixtureWithOrders(t testing.TB, db *gorm.DB, cfg config.Config, o assembly.Options, orders *orderService) *fixture {
	t.Helper()
	return assemble(t, db, cfg, o, orders, nil)
}

// assemble is newFixtureWithOrders whose deductions start their spans from
// tp (nil: none).
func assemble(t testing.TB, db *gorm.DB, cfg config.Config, o assembly.Options, orders *orderService, tp trace.TracerProvider) *fixture {
	t.Helper()
	if o.Orders == nil {
		o.Orders = orders.client()
	}
	clock := &testClock{}
	o.Clock = clock.read
	reg := prometheus.NewRegistry()
	p, err := assembly.UseCases(db, cfg, o, testenv.Logger(t), reg, tp)
	testenv.Must(t, err)
	tpl, err := p.App.CreateTemplate(ctx, coupon.Template{Name: "10 off", DiscountAmount: 1000})
	testenv.Must(t, err)
	return &fixture{app: p.App, clock: clock, store: p.Store, reg: reg, tpl: tpl, orders: orders, cfg: cfg, o: o}
}

// replica is another replica's use cases on f's database, assembled alike.
func (f *fixture) replica(t testing.TB) *app.App {
	t.Helper()
	p, err := assembly.UseCases(f.store.DB(), f.cfg, f.o, testenv.Logger(t), prometheus.NewRegistry(), nil)
	testenv.Must(t, err)
	return p.App
}

// testClock is the app's time in a test (app.Config.Clock): the wall clock
// until setClock moves it, past lock deadlines and expiries, instead of
// waiting for them.
type testClock struct {
	fn atomic.Pointer[func() time.Time]
}

func (c *testClock) read() time.Time {
	if fn := c.fn.Load(); fn != nil {
		return (*fn)()
	}
	return time.Now().UTC()
}

// setClock makes the use cases read the time from now.
func (f *fixture) setClock(now func() time.Time) { f.clock.fn.Store(&now) }

// orderAmount is the total of the fixture's orders: above the template's
// discount, which has no minimum.
const orderAmount = 5000

// lock locks couponID for orderNo as the order service does when it places
// the order.
func (f *fixture) lock(t testing.TB, couponID uint64, orderNo string, userID uint64) coupon.Lock {
	t.Helper()
	l, err := f.app.LockCoupon(ctx, couponID, coupon.LockRequest{OrderNo: orderNo, UserID: userID, OrderAmount: orderAmount})
	testenv.Must(t, err)
	return l
}

// testDB is a fresh database on the service's schema.
func testDB(t testing.TB) *gorm.DB {
	t.Helper()
	return testenv.DB(t, migrations.Source, outbox.Migrations)
}

func (f *fixture) issue(t testing.TB, userID uint64) coupon.Coupon {
	t.Helper()
	c, err := f.app.IssueCoupon(ctx, f.tpl.ID, userID)
	testenv.Must(t, err)
	return c
}

func (f *fixture) land(t testing.TB, messageID, orderNo string, userID, couponID uint64) coupon.Message {
	t.Helper()
	testenv.Must(t, f.store.InTx(ctx, func(tx coupon.Tx) error {
		return f.app.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: messageID, OrderNo: orderNo, UserID: userID, CouponID: couponID})
	}))
	var id uint64
	testenv.Must(t, f.store.DB().Table("coupon_message").Where("message_id = ?", messageID).Pluck("id", &id).Error)
	m, err := f.store.Message(ctx, id)
	testenv.Must(t, err)
	return m
}

func (f *fixture) count(t testing.TB, table, where string, args ...any) int {
	t.Helper()
	var n int64
	testenv.Must(t, f.store.DB().Table(table).Where(where, args...).Count(&n).Error)
	return int(n)
}

// metric returns the value of the counter name with the given label value
// (or the only series when label is "").
func (f *fixture) metric(t testing.TB, name, label string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	testenv.Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabelValue(m, label) {
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabelValue(m *dto.Metric, v string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetValue() == v {
			return true
		}
	}
	return false
}

func TestRetryPassDeductsALandedMessageOnce(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "ORDER-1", 7)
	m := f.land(t, "m1", "ORDER-1", 7, c.ID)
	r, err := f.app.ProcessDueMessages(ctx)
	if err != nil || r.Claimed != 1 || r.Deducted != 1 {
		t.Fatalf("pass = %+v, %v", r, err)
	}
	got, _ := f.store.Message(ctx, m.ID)
	cp, _ := f.app.Coupon(ctx, c.ID)
	if got.Status != coupon.MessageSuccess || cp.Status != coupon.StatusUsed || cp.UsedOrderNo != "ORDER-1" || cp.LockedOrderNo != "ORDER-1" {
		t.Fatalf("message %s, coupon %s by %q (locked by %q)", got.Status, cp.Status, cp.UsedOrderNo, cp.LockedOrderNo)
	}
	if n := f.count(t, "coupon_deduction", "order_no = ? AND amount = ?", "ORDER-1", 1000); n != 1 {
		t.Fatalf("%d ledger rows", n)
	}
	if r, _ := f.app.ProcessDueMessages(ctx); r.Claimed != 0 {
		t.Fatalf("a settled message was claimed again: %+v", r)
	}
	if v := f.metric(t, "coupon_deductions_total", "fixed"); v != 1 {
		t.Fatalf("coupon_deductions_total{mode=fixed} = %v", v)
	}
}

// TestFreshAppExposesItsLabelledCountersAtZero: before any deduction or
// failure, the registry already holds a zero series for every mode and every
// failure reason, so dashboards and alerts read 0 rather than no data.
func TestFreshAppExposesItsLabelledCountersAtZero(t *testing.T) {
	reg := newFixture(t, variant.Fixed).reg
	kinds := make([]string, len(coupon.AnomalyKinds))
	for i, k := range coupon.AnomalyKinds {
		kinds[i] = string(k)
	}
	want := map[string][]string{
		"coupon_deductions_total":      {string(variant.Fixed), string(variant.Broken)},
		"coupon_messages_failed_total": coupon.FailureReasons(),
		"coupon_lock_requests_total":   append([]string{"locked", "same_lock"}, coupon.RefusalReasons()...),
		"coupon_lock_releases_total":   {"release_call", "order_cancelled", "sweep"},
		"coupon_sweep_decisions_total": {"released", "kept", "unreachable", "bad_answer"},
		"coupon_reconcile_findings":    kinds,
	}
	mfs, err := reg.Gather()
	testenv.Must(t, err)
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if got[mf.GetName()] == nil {
					got[mf.GetName()] = map[string]float64{}
				}
				got[mf.GetName()][lp.GetValue()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	for name, labels := range want {
		for _, l := range labels {
			v, ok := got[name][l]
			if !ok || v != 0 {
				t.Errorf("%s{%q}: present %v, value %v; want a zero series", name, l, ok, v)
			}
		}
		if len(got[name]) != len(labels) {
			t.Errorf("%s has series %v, want exactly %q", name, got[name], labels)
		}
	}
}

func TestOrderWithoutCouponLandsNothing(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	testenv.Must(t, f.store.InTx(ctx, func(tx coupon.Tx) error {
		return f.app.LandOrderPaid(ctx, tx, app.OrderPaid{MessageID: "m1", OrderNo: "O", UserID: 1})
	}))
	if n := f.count(t, "coupon_message", "1 = 1"); n != 0 {
		t.Fatalf("%d messages landed for an order without coupon", n)
	}
}

// TestCouponUsedByAnotherOrderFailsTheMessageWithItsReason: the second order
// gets a FAILED message naming the first order, at once (no retries), and the
// first order's deduction is untouched.
func TestCouponUsedByAnotherOrderFailsTheMessageWithItsReason(t *testing.T) {
	for _, mode := range app.DeductionModes {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t, mode)
			c := f.issue(t, 7)
			f.lock(t, c.ID, "FIRST", 7)
			first := f.land(t, "m1", "FIRST", 7, c.ID)
			if out, err := f.app.ProcessMessage(ctx, first); err != nil || out != app.Deducted {
				t.Fatalf("first order: %s, %v", out, err)
			}
			second := f.land(t, "m2", "SECOND", 7, c.ID)
			out, err := f.app.ProcessMessage(ctx, second)
			if out != app.Failed || !errors.Is(err, coupon.ErrUsedByAnotherOrder) {
				t.Fatalf("second order: %s, %v; want failed with ErrUsedByAnotherOrder", out, err)
			}
			got, _ := f.store.Message(ctx, second.ID)
			if got.Status != coupon.MessageFailed || !strings.Contains(got.LastError, "used by order FIRST") || got.RetryCount != 1 {
				t.Fatalf("second message = %s after %d attempts, reason %q", got.Status, got.RetryCount, got.LastError)
			}
			cp, _ := f.app.Coupon(ctx, c.ID)
			if cp.UsedOrderNo != "FIRST" || f.count(t, "coupon_deduction", "order_no = ?", "FIRST") != 1 ||
				f.count(t, "coupon_deduction", "order_no = ?", "SECOND") != 0 {
				t.Fatalf("the first order's deduction changed: coupon used by %q", cp.UsedOrderNo)
			}
			if v := f.metric(t, "coupon_messages_failed_total", "used_by_another_order"); v != 1 {
				t.Fatalf("coupon_messages_failed_total{reason=used_by_another_order} = %v", v)
			}
			if r, _ := f.app.ProcessDueMessages(ctx); r.Claimed != 0 {
				t.Fatalf("the failed message was retried: %+v", r)
			}
		})
	}
}

// TestRetryOfADeductedOrderIsAbsorbed is the fixed path's answer to a retry
// after a lost acknowledgement that reached the coupon anyway (a second
// message for the same order, say): success without a second effect.
func TestRetryOfADeductedOrderIsAbsorbed(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "ORDER", 7)
	first := f.land(t, "m1", "ORDER", 7, c.ID)
	again := f.land(t, "m2", "ORDER", 7, c.ID)
	if out, err := f.app.ProcessMessage(ctx, first); out != app.Deducted || err != nil {
		t.Fatalf("first: %s, %v", out, err)
	}
	if out, err := f.app.ProcessMessage(ctx, again); out != app.Absorbed || err != nil {
		t.Fatalf("again: %s, %v; want absorbed", out, err)
	}
	got, _ := f.store.Message(ctx, again.ID)
	if got.Status != coupon.MessageSuccess || f.count(t, "coupon_deduction", "order_no = ?", "ORDER") != 1 {
		t.Fatalf("message %s, %d ledger rows", got.Status, f.count(t, "coupon_deduction", "order_no = ?", "ORDER"))
	}
	if v := f.metric(t, "coupon_deduction_duplicates_absorbed_total", ""); v != 1 {
		t.Fatalf("duplicates absorbed = %v", v)
	}
}

func raceRetries(f *fixture, m coupon.Message, n int) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, _ = f.app.ProcessMessage(ctx, m)
		})
	}
	close(start)
	wg.Wait()
}

// TestReconcilerFindsTheBrokenAnomalyAndNoneAfterTheFix runs the same 20
// concurrent retries against both deductions and asks the reconciler.
func TestReconcilerFindsTheBrokenAnomalyAndNoneAfterTheFix(t *testing.T) {
	broken := newFixture(t, variant.Broken)
	c := broken.issue(t, 7)
	broken.lock(t, c.ID, "ORDER", 7)
	raceRetries(broken, broken.land(t, "m1", "ORDER", 7, c.ID), 20)
	as, err := broken.app.Reconcile(ctx)
	testenv.Must(t, err)
	if len(as) != 1 || as[0].Kind != coupon.AnomalyDuplicateDeduction || as[0].OrderNo != "ORDER" || as[0].Count < 2 {
		t.Fatalf("broken: anomalies %+v; want one duplicate deduction of ORDER", as)
	}

	fixed := newFixture(t, variant.Fixed)
	c = fixed.issue(t, 7)
	fixed.lock(t, c.ID, "ORDER", 7)
	raceRetries(fixed, fixed.land(t, "m1", "ORDER", 7, c.ID), 20)
	as, err = fixed.app.Reconcile(ctx)
	if err != nil || len(as) != 0 {
		t.Fatalf("fixed: anomalies %+v, %v; want none", as, err)
	}
	if v := fixed.metric(t, "coupon_deduction_duplicates_absorbed_total", ""); v != 19 {
		t.Fatalf("fixed: %v duplicates absorbed, want 19", v)
	}
}

// flakyStore is the real store whose deduction transactions fail before
// reaching the database, as a dead connection would: it tests the retry
// bookkeeping of the app, which is the component under test.
type flakyStore struct {
	*store.Store
}

func (flakyStore) InTx(context.Context, func(coupon.Tx) error) error {
	return errors.New("dial tcp 127.0.0.1:3306: connection refused")
}

func TestTransientFailuresRetryThenFailAtTheLimit(t *testing.T) {
	f := newFixtureOn(t, variant.Fixed, func(s *store.Store) coupon.Store { return flakyStore{s} })
	c := f.issue(t, 7)
	testenv.Must(t, f.store.InTx(ctx, func(tx coupon.Tx) error {
		m, _ := coupon.NewMessage("m1", "ORDER", 7, c.ID, time.Now().UTC())
		_, err := tx.InsertMessage(ctx, &m)
		return err
	}))
	var passes []app.PassResult
	for range 6 {
		time.Sleep(5 * time.Millisecond)
		r, err := f.app.ProcessDueMessages(ctx)
		testenv.Must(t, err)
		passes = append(passes, r)
	}
	// Max is 3: two retries scheduled, the third failure is final.
	if passes[0].Retried != 1 || passes[1].Retried != 1 || passes[2].Failed != 1 || passes[3].Claimed != 0 {
		t.Fatalf("passes = %+v", passes)
	}
	var row struct {
		Status     string
		RetryCount int
		LastError  string
	}
	testenv.Must(t, f.store.DB().Table("coupon_message").Where("message_id = ?", "m1").Take(&row).Error)
	if row.Status != "FAILED" || row.RetryCount != 3 || !strings.Contains(row.LastError, "connection refused") {
		t.Fatalf("message = %+v", row)
	}
	if v := f.metric(t, "coupon_messages_failed_total", "max_retries"); v != 1 {
		t.Fatalf("coupon_messages_failed_total{reason=max_retries} = %v", v)
	}
}

// TestRetryPassesDrainABacklogOnceAcrossReplicas: 120 landed messages, a
// batch of 25 and 8 workers per pass, and two replicas' passes at once (as
// when a pass outlives its interval on one replica and the next interval's
// runs on another). One pass drains more than one batch, the two passes
// together attempt every message exactly once, and each order has one
// ledger row and its coupon USED by it.
func TestRetryPassesDrainABacklogOnceAcrossReplicas(t *testing.T) {
	const n = 120
	f := newFixtureWith(t, testDB(t), coupontest.Settings(t, map[string]string{"COUPON_RETRY_BATCH": "25", "COUPON_RETRY_WORKERS": "8"}), assembly.Options{})
	other := f.replica(t)
	for i := range n {
		order := fmt.Sprintf("BACKLOG-%03d", i)
		c := f.issue(t, 7)
		f.lock(t, c.ID, order, 7)
		f.land(t, "m-"+order, order, 7, c.ID)
	}
	var (
		wg      sync.WaitGroup
		results [2]app.PassResult
		errs    [2]error
	)
	for i, a := range []*app.App{f.app, other} {
		wg.Go(func() { results[i], errs[i] = a.ProcessDueMessages(ctx) })
	}
	wg.Wait()
	testenv.Must(t, errors.Join(errs[:]...))
	if got := results[0].Claimed + results[1].Claimed; got != n {
		t.Fatalf("the two passes claimed %d messages (%+v, %+v), want each of the %d once", got, results[0], results[1], n)
	}
	if got := results[0].Deducted + results[1].Deducted; got != n {
		t.Fatalf("%d deductions (%+v, %+v), want %d", got, results[0], results[1], n)
	}
	if max(results[0].Claimed, results[1].Claimed) <= f.cfg.RetryBatch {
		t.Fatalf("no pass claimed more than one batch (%+v, %+v): a backlog would drain one batch per interval", results[0], results[1])
	}
	if rows := f.count(t, "coupon_deduction", "order_no LIKE ?", "BACKLOG-%"); rows != n {
		t.Fatalf("%d ledger rows, want %d", rows, n)
	}
	if used := f.count(t, "coupons", "status = ? AND used_order_no LIKE ?", coupon.StatusUsed, "BACKLOG-%"); used != n {
		t.Fatalf("%d coupons USED, want %d", used, n)
	}
}

// TestADeliveryDeductsInTheTransactionThatLandsIt: the order.paid
// consumer's handler deducts a coupon LOCKED by the order in the inbox's
// transaction, with three writes and no read: the conditional update, the
// ledger row (its amount the template's) and the message, SUCCESS. They
// commit with that transaction or not at all, and nothing is left for the
// retry pass. No after-commit hook runs here (a plain transaction, as the
// inbox's would be without its consumer), so what is done was done in the
// transaction.
func TestADeliveryDeductsInTheTransactionThatLandsIt(t *testing.T) {
	rdb, rec := testenv.RecordSQL(testDB(t))
	f := newFixtureWith(t, rdb, coupontest.Settings(t, nil), assembly.Options{})
	st := f.store
	c := f.issue(t, 7)
	f.lock(t, c.ID, "ORDER-A", 7)
	paid := app.OrderPaid{MessageID: "m-a", OrderNo: "ORDER-A", UserID: 7, CouponID: c.ID}
	deliver := func(after error) error {
		return st.DB().Transaction(func(gtx *gorm.DB) error {
			if err := f.app.ReceiveOrderPaid(ctx, st.InboxTx(ctx, gtx), paid); err != nil {
				return err
			}
			return after
		})
	}

	rolledBack := errors.New("the inbox's transaction rolls back")
	if err := deliver(rolledBack); !errors.Is(err, rolledBack) {
		t.Fatalf("delivery = %v, want the rollback", err)
	}
	if got, _ := f.store.Coupon(ctx, c.ID); got.Status != coupon.StatusLocked ||
		f.count(t, "coupon_deduction", "1 = 1")+f.count(t, "coupon_message", "1 = 1") != 0 {
		t.Fatalf("a rolled-back delivery left the coupon %s and rows behind", got.Status)
	}

	rec.Take("")
	testenv.Must(t, deliver(nil))
	writes := rec.Take("")
	if len(writes) != 3 || !strings.HasPrefix(writes[0], "UPDATE coupons ") ||
		!strings.HasPrefix(writes[1], "INSERT INTO `coupon_deduction`") || !strings.HasPrefix(writes[2], "INSERT INTO `coupon_message`") {
		t.Fatalf("the delivery sent %d statements, want the update, the ledger row and the message:\n%s", len(writes), strings.Join(writes, "\n"))
	}
	if n := f.count(t, "coupon_deduction", "order_no = ? AND coupon_id = ? AND user_id = ? AND amount = ? AND message_id = ?",
		"ORDER-A", c.ID, 7, f.tpl.DiscountAmount, "m-a"); n != 1 {
		t.Fatalf("%d ledger rows of ORDER-A with the template's discount, want 1", n)
	}
	if got, _ := f.store.Coupon(ctx, c.ID); got.Status != coupon.StatusUsed || got.UsedOrderNo != "ORDER-A" {
		t.Fatalf("coupon %+v, want USED by ORDER-A", got)
	}
	if n := f.count(t, "coupon_message", "message_id = ? AND status = ?", "m-a", coupon.MessageSuccess); n != 1 {
		t.Fatalf("the message is not landed SUCCESS")
	}
	if r, err := f.app.ProcessDueMessages(ctx); err != nil || r.Claimed != 0 {
		t.Fatalf("pass = %+v, %v; want nothing left for it", r, err)
	}
}

// TestADeliveryThatCannotDeductLeavesItsMessageToTheAttempt: a delivery
// whose coupon is not LOCKED by the order lands the message PENDING, due
// after the claim lease, for the attempt made after the commit. When that
// attempt never runs (the process died right after the commit: here, a
// transaction with no after-commit hooks), the pass leaves the message
// alone until the lease has run out, then takes it once: here the coupon
// has been locked by the order since, and the pass deducts it.
func TestADeliveryThatCannotDeductLeavesItsMessageToTheAttempt(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	now := time.Now().UTC()
	f.setClock(func() time.Time { return now })
	c := f.issue(t, 7)
	testenv.Must(t, f.store.DB().Transaction(func(gtx *gorm.DB) error {
		return f.app.ReceiveOrderPaid(ctx, f.store.InboxTx(ctx, gtx), app.OrderPaid{MessageID: "m-b", OrderNo: "ORDER-B", UserID: 7, CouponID: c.ID})
	}))
	if n := f.count(t, "coupon_message", "message_id = ? AND status = ?", "m-b", coupon.MessagePending); n != 1 {
		t.Fatalf("the message of an UNUSED coupon is not landed PENDING")
	}
	f.lock(t, c.ID, "ORDER-B", 7)
	r, err := f.app.ProcessDueMessages(ctx)
	testenv.Must(t, err)
	if r.Claimed != 0 {
		t.Fatalf("pass within the claim lease = %+v, want nothing claimed", r)
	}

	now = now.Add(f.cfg.RetryLease + time.Second)
	r, err = f.app.ProcessDueMessages(ctx)
	testenv.Must(t, err)
	if r.Claimed != 1 || r.Deducted != 1 {
		t.Fatalf("pass after the claim lease = %+v, want ORDER-B's message claimed and deducted", r)
	}
	if n := f.count(t, "coupon_deduction", "order_no = ?", "ORDER-B"); n != 1 {
		t.Fatalf("ORDER-B has %d deductions, want 1", n)
	}
}

// TestConcurrentDeliveriesOfOneOrderDeductOnce: order.paid of one order
// under 20 message ids (the inbox deduplicates one id, not one order),
// delivered at once: one delivery deducts in its transaction, the others
// find the coupon USED, land their messages and are absorbed by their
// attempts. One ledger row, every message SUCCESS.
func TestConcurrentDeliveriesOfOneOrderDeductOnce(t *testing.T) {
	const n = 20
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "ORDER-C", 7)
	var wg sync.WaitGroup
	var errs [n]error
	for i := range n {
		wg.Go(func() {
			errs[i] = f.store.InTx(ctx, func(tx coupon.Tx) error {
				return f.app.ReceiveOrderPaid(ctx, tx, app.OrderPaid{MessageID: fmt.Sprintf("m-%d", i), OrderNo: "ORDER-C", UserID: 7, CouponID: c.ID})
			})
		})
	}
	wg.Wait()
	testenv.Must(t, errors.Join(errs[:]...))
	if rows := f.count(t, "coupon_deduction", "order_no = ?", "ORDER-C"); rows != 1 {
		t.Fatalf("%d ledger rows for ORDER-C, want 1", rows)
	}
	if settled := f.count(t, "coupon_message", "status = ?", coupon.MessageSuccess); settled != n {
		t.Fatalf("%d messages SUCCESS, want %d", settled, n)
	}
	if d, a := f.metric(t, "coupon_deductions_total", string(variant.Fixed)), f.metric(t, "coupon_deduction_duplicates_absorbed_total", ""); d != 1 || a != n-1 {
		t.Fatalf("%v deductions and %v absorbed counted, want 1 and %d", d, a, n-1)
	}
}
