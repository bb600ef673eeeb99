package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// signedRefund returns a refund notification body and its valid signature
// headers.
func signedRefund(t testing.TB, n psp.RefundNotification) ([]byte, http.Header) {
	t.Helper()
	body, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	psp.SignHeaders(h, []byte(paymentlab.DevSecret), time.Now(), body)
	return body, h
}

// closedThenPaid makes the payment no land after its order closed: the
// platform answers the close "closed" although the customer paid
// (close_race), then its held notification arrives, copies at once. It
// returns the charge as the platform knows it.
func (f *fixture) closedThenPaid(no string, copies int) pspsim.Charge {
	f.t.Helper()
	c := f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeCloseRace, Copies: copies})
	if status, out := f.closeOrder("O" + no); status != http.StatusOK || out != "closed" {
		f.t.Fatalf("close: %d %q, want 200 closed", status, out)
	}
	testenv.Must(f.t, f.sim.Deliver(no))
	f.waitSim()
	return c
}

// refundCallbacks returns payment_refund_callbacks_total{outcome}.
func (f *fixture) refundCallbacks(outcome string) float64 {
	f.t.Helper()
	mfs, err := f.svc.Registry.Gather()
	testenv.Must(f.t, err)
	for _, mf := range mfs {
		if mf.GetName() != "payment_refund_callbacks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestLatePaymentIsRefundedOnce is the whole path of a payment that lands
// after its order closed, under storms: 30 copies of the paid notification
// at once make one record, REFUNDING and one refund row, and no
// payment.succeeded; eight payment-refund runs at once send one refund
// request; 30 copies of the refund notification make it REFUNDED with one
// payment.refunded. Then tens more copies of both notifications, at once,
// change nothing, and the reconciler is empty.
func TestLatePaymentIsRefundedOnce(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	no := f.payment()
	charge := f.closedThenPaid(no, 30)
	e := f.effects(no)
	if e.Status != "REFUNDING" || e.Records != 1 || e.Refunds != 1 || e.RefundStatus != "PENDING" || e.Events != 0 {
		t.Fatalf("after the late payment's storm: %+v, want REFUNDING with 1 record, 1 PENDING refund, no payment.succeeded", e)
	}
	if refunding, dup := f.callbacks("fixed", "refunding"), f.callbacks("fixed", "duplicate"); refunding != 1 || dup != 29 {
		t.Fatalf("%v copies recorded the late payment and %v were duplicates, want 1 and 29", refunding, dup)
	}
	if alerts := f.logged("refund_no", payment.RefundNoFor(no)); len(alerts) != 1 || alerts[0]["level"] != "WARN" {
		t.Fatalf("the late payment is logged %v, want one warning naming its refund", alerts)
	}

	// Eight replicas' payment-refund jobs at once: one request.
	var sent atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			rep, err := f.svc.App.SendRefunds(context.Background())
			if err != nil {
				t.Errorf("send refunds: %v", err)
			}
			sent.Add(int32(rep.Sent))
		})
	}
	wg.Wait()
	refundNo := payment.RefundNoFor(no)
	ref, ok := f.sim.GetRefund(refundNo)
	if sent.Load() != 1 || !ok || ref.Requests != 1 || ref.Notification.Amount != 4200 {
		t.Fatalf("%d requests sent, the platform saw %+v, want one request for 4200", sent.Load(), ref)
	}
	f.waitSim()
	e = f.effects(no)
	if e.Status != "REFUNDED" || e.RefundStatus != "REFUNDED" || e.RefundEvents != 1 || e.Records != 1 || e.Events != 0 {
		t.Fatalf("after the refund notification's storm: %+v, want REFUNDED with one payment.refunded", e)
	}
	if processed, dup := f.refundCallbacks("processed"), f.refundCallbacks("duplicate"); processed != 1 || dup != 29 {
		t.Fatalf("refund notifications: %v processed and %v duplicates, want 1 and 29", processed, dup)
	}
	if rep, err := f.svc.App.SendRefunds(context.Background()); err != nil || rep.Sent != 0 {
		t.Fatalf("a run after the refund: %+v %v, want nothing sent", rep, err)
	}

	// Retries of both notifications, tens at once, long after: duplicates.
	before := f.snapshot()
	paidBody, paidHeader := signedCallback(t, charge.Notification)
	refundBody, refundHeader := signedRefund(t, ref.Notification)
	for range 40 {
		wg.Go(func() {
			if status, body := f.post("/payments/callback", paidBody, paidHeader); status != http.StatusOK || !strings.Contains(string(body), `"duplicate"`) {
				t.Errorf("late paid copy: %d %s, want 200 duplicate", status, body)
			}
		})
		wg.Go(func() {
			if status, body := f.post("/payments/refunds/callback", refundBody, refundHeader); status != http.StatusOK || !strings.Contains(string(body), `"duplicate"`) {
				t.Errorf("late refund copy: %d %s, want 200 duplicate", status, body)
			}
		})
	}
	wg.Wait()
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("late copies changed the tables:\nbefore %+v\nafter  %+v", before, after)
	}
	if r := f.reconcile(); !r.Empty {
		t.Fatalf("reconciliation after the refund: %+v", r.Report)
	}
	status, body := f.get("/payments/"+no, owner(paymentlab.UserID))
	if status != http.StatusOK || !strings.Contains(string(body), `"status":"REFUNDED"`) {
		t.Fatalf("GET by the owner: %d %s, want REFUNDED", status, body)
	}
}

// TestRefundCallbackRefusalsChangeNothing: every refused refund
// notification answers problem+json with its status, is counted by its
// reason, and writes nothing; the refund is still settled by the valid one.
func TestRefundCallbackRefusalsChangeNothing(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	no := f.payment()
	charge := f.closedThenPaid(no, 1)
	valid := psp.RefundNotification{Channel: psp.Channel, RefundSerial: "RF-direct-1", RefundNo: payment.RefundNoFor(no),
		OutTradeNo: no, Amount: 4200, RefundStatus: psp.TradeSuccess, RefundedAt: time.Now().UTC().Truncate(time.Millisecond)}
	with := func(change func(*psp.RefundNotification)) psp.RefundNotification {
		n := valid
		change(&n)
		return n
	}
	signedBy := func(secret string, at time.Time, body []byte) http.Header {
		h := http.Header{}
		psp.SignHeaders(h, []byte(secret), at, body)
		return h
	}
	marshal := func(v any) []byte { b, _ := json.Marshal(v); return b }
	validBody := marshal(valid)
	for _, tc := range []struct {
		name    string
		body    []byte
		header  http.Header // nil: validly signed now
		want    int
		outcome string
	}{
		{"no signature", validBody, http.Header{}, http.StatusUnauthorized, "bad_signature"},
		{"signed with another secret", validBody, signedBy("not-the-secret", time.Now(), validBody), http.StatusUnauthorized, "bad_signature"},
		{"stale timestamp", validBody, signedBy(paymentlab.DevSecret, time.Now().Add(-time.Hour), validBody), http.StatusUnauthorized, "stale_timestamp"},
		{"not JSON", []byte(`{"refund`), nil, http.StatusBadRequest, "malformed"},
		{"no refund_no", marshal(with(func(n *psp.RefundNotification) { n.RefundNo = "" })), nil, http.StatusBadRequest, "malformed"},
		{"not a success", marshal(with(func(n *psp.RefundNotification) { n.RefundStatus = "FAILED" })), nil, http.StatusBadRequest, "malformed"},
		{"unknown channel", marshal(with(func(n *psp.RefundNotification) { n.Channel = "other" })), nil, http.StatusBadRequest, "malformed"},
		{"a paid notification at the refund address", marshal(charge.Notification), nil, http.StatusBadRequest, "malformed"},
		{"unknown refund", marshal(with(func(n *psp.RefundNotification) { n.RefundNo = "R-nobody" })), nil, http.StatusNotFound, "unknown_refund"},
		{"another amount", marshal(with(func(n *psp.RefundNotification) { n.Amount = 4199 })), nil, http.StatusUnprocessableEntity, "amount_mismatch"},
		{"another payment", marshal(with(func(n *psp.RefundNotification) { n.OutTradeNo = "P-other" })), nil, http.StatusUnprocessableEntity, "amount_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = signedBy(paymentlab.DevSecret, time.Now(), tc.body)
			}
			before, counted := f.snapshot(), f.refundCallbacks(tc.outcome)
			req, _ := http.NewRequest(http.MethodPost, f.svc.RefundCallbackURL, strings.NewReader(string(tc.body)))
			req.Header = h
			status, hdr, body := f.doFull(req)
			if status != tc.want || !isProblem(hdr) {
				t.Fatalf("%d %s %s, want %d problem+json", status, hdr.Get("Content-Type"), body, tc.want)
			}
			if after := f.snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("tables changed:\nbefore %+v\nafter  %+v", before, after)
			}
			if got := f.refundCallbacks(tc.outcome); got != counted+1 {
				t.Fatalf("payment_refund_callbacks_total{outcome=%q} went %v → %v", tc.outcome, counted, got)
			}
		})
	}
	if len(f.logged("alert", "payment_refund_mismatch")) != 2 {
		t.Fatalf("want one payment_refund_mismatch alert per mismatching notification:\n%s", f.logs.String())
	}
	// The valid notification still settles the refund, even before the
	// refund request was sent (the platform's refund serial is recorded).
	status, body := f.post("/payments/refunds/callback", validBody, signedBy(paymentlab.DevSecret, time.Now(), validBody))
	if status != http.StatusOK || !strings.Contains(string(body), `"processed"`) {
		t.Fatalf("valid: %d %s", status, body)
	}
	r, err := f.svc.Store.GetRefund(context.Background(), valid.RefundNo)
	testenv.Must(t, err)
	if r.Status != payment.RefundDone || r.RefundSerial != "RF-direct-1" || r.RefundedAt == nil {
		t.Fatalf("refund %+v, want REFUNDED by RF-direct-1", r)
	}
}

// TestRefundRequestSettledAfterItsNotification: the platform's notification
// overtakes the settling of the request that caused it; the refund is
// REFUNDED once, and the late settle changes nothing.
func TestRefundRequestSettledAfterItsNotification(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	no := f.payment()
	f.closedThenPaid(no, 1)
	ctx := context.Background()
	claimed, ok, err := f.svc.Store.ClaimRefund(ctx, time.Now().UTC(), time.Minute)
	if err != nil || !ok || claimed.RefundNo != payment.RefundNoFor(no) || claimed.Attempts != 1 {
		t.Fatalf("claim: %+v %v %v", claimed, ok, err)
	}
	n := psp.RefundNotification{Channel: psp.Channel, RefundSerial: "RF-first", RefundNo: claimed.RefundNo, OutTradeNo: no,
		Amount: 4200, RefundStatus: psp.TradeSuccess, RefundedAt: time.Now().UTC()}
	body, h := signedRefund(t, n)
	if status, b := f.post("/payments/refunds/callback", body, h); status != http.StatusOK {
		t.Fatalf("notification: %d %s", status, b)
	}
	moved, err := f.svc.Store.RefundSubmitted(ctx, claimed.RefundNo, "RF-first", time.Now())
	if err != nil || moved {
		t.Fatalf("late settle: moved=%v err=%v, want nothing changed", moved, err)
	}
	if e := f.effects(no); e.Status != "REFUNDED" || e.RefundStatus != "REFUNDED" || e.RefundEvents != 1 {
		t.Fatalf("effects %+v", e)
	}
}

// TestRefundRequestsAreRetriedAndLeased: a platform that fails the first
// refund requests gets them again after the backoff, until one is
// accepted; each attempt is counted on the row, the failure recorded and
// then cleared; and a claimed refund is hidden from other claimers for its
// lease only.
func TestRefundRequestsAreRetriedAndLeased(t *testing.T) {
	sim, simURL, stop, err := paymentlab.StartSimulator(lab.Env{Log: testenv.Logger(t)})
	testenv.Must(t, err)
	t.Cleanup(stop)
	target, _ := url.Parse(simURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refunds" && refused.Add(1) <= 2 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	f := buildFixture(t, paymenttest.Config{Vars: map[string]string{"PSP_URL": flaky.URL,
		"PAYMENT_REFUND_BACKOFF": "300ms", "PAYMENT_REFUND_BACKOFF_MAX": "400ms"}})
	// The fixture's charges and deliveries go to this simulator, behind
	// the flaky front only for the service's own calls.
	f.sim, f.psp = sim, psp.NewClient(simURL, http.DefaultClient)
	no := f.payment()
	f.closedThenPaid(no, 1)
	ctx := context.Background()
	refundNo := payment.RefundNoFor(no)

	for attempt := 1; attempt <= 2; attempt++ {
		rep, err := f.svc.App.SendRefunds(ctx)
		if err != nil || rep.Failed != 1 || rep.Sent != 0 {
			t.Fatalf("attempt %d: %+v %v, want one failure", attempt, rep, err)
		}
		r, _ := f.svc.Store.GetRefund(ctx, refundNo)
		if r.Status != payment.RefundPending || r.Attempts != attempt || !strings.Contains(r.LastError, "503") {
			t.Fatalf("after failure %d: %+v", attempt, r)
		}
		// Not due again before its backoff.
		if rep, _ := f.svc.App.SendRefunds(ctx); rep.Sent+rep.Failed != 0 {
			t.Fatalf("sent again inside the backoff: %+v", rep)
		}
		// Past the backoff (long enough that a busy machine's pause
		// between the two calls above never outlasts it).
		time.Sleep(450 * time.Millisecond)
	}
	if rep, err := f.svc.App.SendRefunds(ctx); err != nil || rep.Sent != 1 {
		t.Fatalf("third attempt: %+v %v", rep, err)
	}
	f.waitSim()
	r, _ := f.svc.Store.GetRefund(ctx, refundNo)
	if r.Status != payment.RefundDone || r.Attempts != 3 || r.LastError != "" || r.RefundSerial == "" {
		t.Fatalf("after success: %+v", r)
	}
	if ref, _ := sim.GetRefund(refundNo); ref.Requests != 1 {
		t.Fatalf("the platform made %d requests' worth, want 1", ref.Requests)
	}

	// The lease: a claimed refund is nobody else's until it runs out.
	other := f.payment()
	f.closedThenPaid(other, 1)
	now := time.Now().UTC()
	if _, ok, _ := f.svc.Store.ClaimRefund(ctx, now, time.Minute); !ok {
		t.Fatal("nothing to claim")
	}
	if _, ok, _ := f.svc.Store.ClaimRefund(ctx, now.Add(59*time.Second), time.Minute); ok {
		t.Fatal("a leased refund was claimed again inside its lease")
	}
	again, ok, _ := f.svc.Store.ClaimRefund(ctx, now.Add(61*time.Second), time.Minute)
	if !ok || again.RefundNo != payment.RefundNoFor(other) || again.Attempts != 2 {
		t.Fatalf("after the lease: %+v %v, want the refund claimed again", again, ok)
	}
}
