package app_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
)

// newTracedFixture is the fixed deduction's fixture whose use cases start
// their spans from rec.
func newTracedFixture(t *testing.T, rec *spantest.Recorder) *fixture {
	t.Helper()
	return assemble(t, testDB(t), coupontest.Settings(t, fastRetries), assembly.Options{}, newOrderService(t), rec.Provider)
}

// landIn lands order.paid for orderNo inside a span standing for the inbox
// delivery (with request id reqID in the baggage) and returns that span.
func (f *fixture) landIn(t *testing.T, rec *spantest.Recorder, messageID, orderNo string, couponID uint64, reqID string) spantest.Span {
	t.Helper()
	dctx, delivery := rec.Provider.Tracer("test").Start(tracing.WithRequestID(context.Background(), reqID), "process order.paid "+messageID)
	err := f.store.InTx(dctx, func(tx coupon.Tx) error {
		return f.app.LandOrderPaid(dctx, tx, app.OrderPaid{MessageID: messageID, OrderNo: orderNo, UserID: 7, CouponID: couponID})
	})
	delivery.End()
	testenv.Must(t, err)
	return spantest.Find(t, rec.Spans(), "process order.paid "+messageID)
}

// TestDeductionContinuesTheTraceOfItsDelivery: the retry job deducts in a
// pass that starts a trace of its own, yet each attempt's "deduct coupon"
// span is a child of the order.paid delivery that landed its message, with
// that trace's request id; the attempt absorbed because the order already
// used the coupon (a second order.paid of one order, under another message
// id) is marked duplicate=true, whichever of the two ran first.
func TestDeductionContinuesTheTraceOfItsDelivery(t *testing.T) {
	rec := spantest.NewRecorder(t)
	f := newTracedFixture(t, rec)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "ORDER-1", 7)
	first := f.landIn(t, rec, "m1", "ORDER-1", c.ID, "req-buy-1")
	second := f.landIn(t, rec, "m2", "ORDER-1", c.ID, "req-buy-1")

	pctx, pass := rec.Provider.Tracer("test").Start(context.Background(), "job coupon-retry-pass", trace.WithNewRoot())
	r, err := f.app.ProcessDueMessages(pctx)
	pass.End()
	if err != nil || r.Deducted != 1 || r.Absorbed != 1 {
		t.Fatalf("pass = %+v, %v; want one deducted, one absorbed", r, err)
	}

	deductions := spantest.Named(rec.Spans(), "deduct coupon")
	if len(deductions) != 2 {
		t.Fatalf("%d deduction spans, want 2:\n%s", len(deductions), spantest.List(rec.Spans()))
	}
	byParent := map[string]spantest.Span{}
	for _, d := range deductions {
		byParent[d.Parent] = d
	}
	// The pass works on several messages at once, so either message may be
	// the one that deducts; the other is absorbed, and marked a duplicate.
	outcomes := map[string]int{}
	for _, tc := range []struct {
		delivery spantest.Span
		message  string
	}{{first, "m1"}, {second, "m2"}} {
		d, ok := byParent[tc.delivery.SpanID]
		if !ok {
			t.Fatalf("no deduction span under the delivery of %s:\n%s", tc.message, spantest.List(deductions))
		}
		spantest.ChildOf(t, d, tc.delivery)
		duplicate := map[string]string{string(app.Deducted): "false", string(app.Absorbed): "true"}[d.Attrs["outcome"]]
		if d.Attrs["messaging.message.id"] != tc.message || duplicate == "" || d.Attrs["duplicate"] != duplicate ||
			d.Attrs["request_id"] != "req-buy-1" || d.Attrs["order_no"] != "ORDER-1" {
			t.Fatalf("deduction of %s: %s, want outcome deducted (duplicate=false) or absorbed (duplicate=true), request_id req-buy-1", tc.message, d)
		}
		outcomes[d.Attrs["outcome"]]++
	}
	if outcomes[string(app.Deducted)] != 1 || outcomes[string(app.Absorbed)] != 1 {
		t.Fatalf("outcomes %v, want one deducted and one absorbed", outcomes)
	}
}

// TestUntracedLandingKeepsNoTrace: with tracing off the message row holds
// no trace headers and the pass starts no span.
func TestUntracedLandingKeepsNoTrace(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	c := f.issue(t, 7)
	f.lock(t, c.ID, "ORDER-1", 7)
	rec := spantest.NewRecorder(t)
	dctx, delivery := rec.Provider.Tracer("test").Start(context.Background(), "delivery")
	testenv.Must(t, f.store.InTx(dctx, func(tx coupon.Tx) error {
		return f.app.LandOrderPaid(dctx, tx, app.OrderPaid{MessageID: "m1", OrderNo: "ORDER-1", UserID: 7, CouponID: c.ID})
	}))
	delivery.End()
	if n := f.count(t, "coupon_message", "message_id = ? AND trace_headers = ''", "m1"); n != 1 {
		t.Fatalf("the untraced app kept the trace headers of its caller")
	}
	if _, err := f.app.ProcessDueMessages(dctx); err != nil {
		t.Fatal(err)
	}
	if n := len(spantest.Named(rec.Spans(), "deduct coupon")); n != 0 {
		t.Fatalf("%d deduction spans with tracing off", n)
	}
}
