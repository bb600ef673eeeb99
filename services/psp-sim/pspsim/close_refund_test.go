package pspsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// refundMerchant is a real HTTP peer receiving refund notifications: it
// verifies each with the contract (psp.VerifyRefund) and answers what answer
// says.
type refundMerchant struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []psp.RefundNotification
	errs   []error
	answer func(n int) int
}

func newRefundMerchant(t *testing.T, answer func(n int) int) *refundMerchant {
	m := &refundMerchant{answer: answer}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, err := psp.VerifyRefund(r.Header, body, []byte(secret), time.Now(), 5*time.Minute)
		m.mu.Lock()
		m.got = append(m.got, n)
		m.errs = append(m.errs, err)
		count := len(m.got)
		m.mu.Unlock()
		w.WriteHeader(m.answer(count))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *refundMerchant) received() ([]psp.RefundNotification, []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]psp.RefundNotification(nil), m.got...), append([]error(nil), m.errs...)
}

// chargeHeld charges P1 under plan, whose notification is held: the
// charge is accepted, and not done.
func chargeHeld(t *testing.T, sim *pspsim.Simulator, c peer, m *merchant, plan pspsim.Plan) pspsim.Charge {
	t.Helper()
	if status := c.plan(t, "P1", plan); status != http.StatusCreated {
		t.Fatalf("POST /sim/plans %+v: %d, want 201", plan, status)
	}
	resp, err := c.Charge(context.Background(), psp.ChargeRequest{OutTradeNo: "P1", Amount: 4200, NotifyURL: m.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	got, ok := sim.Get(resp.PlatformSerial)
	if !ok || got.Done {
		t.Fatalf("held charge %s: %+v", resp.PlatformSerial, got)
	}
	return got
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, err := admin.Post(url, "application/json", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHeldNotificationWaitsForDeliver: in hold mode the charge is paid at
// once (a query and a close say so, with the transaction) and its
// notification goes out only on POST /sim/charges/{out_trade_no}/deliver,
// with the plan's copies; a second deliver, or one for an unknown charge,
// is refused.
func TestHeldNotificationWaitsForDeliver(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ch := chargeHeld(t, sim, c, m, pspsim.Plan{Mode: pspsim.ModeHold, Copies: 3})
	if len(m.received()) != 0 || !ch.Held || ch.Done {
		t.Fatalf("a held charge notified %d times (held %v, done %v)", len(m.received()), ch.Held, ch.Done)
	}
	ctx := context.Background()
	trade, err := c.Query(ctx, "P1")
	if err != nil || !trade.Paid() || trade.PlatformSerial != ch.Notification.PlatformSerial || trade.Amount != 4200 {
		t.Fatalf("query: %+v %v, want PAID with the transaction", trade, err)
	}
	closed, err := c.Close(ctx, "P1")
	if err != nil || closed.Status != psp.ClosePaid || closed.PlatformSerial != ch.Notification.PlatformSerial || closed.PaidAt == nil {
		t.Fatalf("close: %+v %v, want paid with the transaction", closed, err)
	}
	if status := post(t, c.url+"/sim/charges/P1/deliver"); status != http.StatusAccepted {
		t.Fatalf("deliver: %d, want 202", status)
	}
	wait(t, sim)
	if got := m.received(); len(got) != 3 {
		t.Fatalf("delivered %d copies, want the plan's 3", len(got))
	}
	if status := post(t, c.url+"/sim/charges/P1/deliver"); status != http.StatusConflict {
		t.Fatalf("second deliver: %d, want 409", status)
	}
	if status := post(t, c.url+"/sim/charges/P-none/deliver"); status != http.StatusNotFound {
		t.Fatalf("deliver of an unknown charge: %d, want 404", status)
	}
}

// TestSilentChargeNeverNotifies: a silent charge is paid and never
// notified, nor are its refunds; only a query tells.
func TestSilentChargeNeverNotifies(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	rm := newRefundMerchant(t, func(int) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, &pspsim.Plan{Mode: pspsim.ModeSilent})
	ctx := context.Background()
	if trade, err := c.Query(ctx, "P1"); err != nil || !trade.Paid() {
		t.Fatalf("query: %+v %v", trade, err)
	}
	if _, err := c.Refund(ctx, psp.RefundRequest{RefundNo: "R1", OutTradeNo: "P1", Amount: 4200, NotifyURL: rm.srv.URL}); err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	got, _ := rm.received()
	if len(m.received()) != 0 || len(got) != 0 || !ch.Done {
		t.Fatalf("a silent charge notified %d payments and %d refunds", len(m.received()), len(got))
	}
	if status := post(t, c.url+"/sim/charges/P1/deliver"); status != http.StatusConflict {
		t.Fatalf("deliver of a silent charge: %d, want 409", status)
	}
}

// TestCloseRaceAnswersClosedAlthoughPaid: in close_race mode the close
// answers closed, the charge stays paid (a query says so), and its held
// notification still reaches the merchant when delivered.
func TestCloseRaceAnswersClosedAlthoughPaid(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ch := chargeHeld(t, sim, c, m, pspsim.Plan{Mode: pspsim.ModeCloseRace})
	ctx := context.Background()
	if closed, err := c.Close(ctx, "P1"); err != nil || closed.Status != psp.CloseClosed || closed.PlatformSerial != "" {
		t.Fatalf("close: %+v %v, want closed", closed, err)
	}
	if trade, err := c.Query(ctx, "P1"); err != nil || !trade.Paid() {
		t.Fatalf("query after the close: %+v %v, want it still paid", trade, err)
	}
	if err := sim.Deliver("P1"); err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	if got := m.received(); len(got) != 1 || got[0].n.PlatformSerial != ch.Notification.PlatformSerial || got[0].verifyErr != nil {
		t.Fatalf("delivered %+v, want the paid notification", got)
	}
}

// TestCloseBeforeTheChargeRefusesIt: closing a trade number the platform
// never charged answers closed and closes it for good: a query says
// CLOSED, and a later charge of it is refused (psp.ErrChargeClosed). An
// unknown trade number is psp.ErrUnknownCharge to a query.
func TestCloseBeforeTheChargeRefusesIt(t *testing.T) {
	_, c := startSim(t, config())
	ctx := context.Background()
	if closed, err := c.Close(ctx, "P-early"); err != nil || closed.Status != psp.CloseClosed {
		t.Fatalf("close: %+v %v", closed, err)
	}
	if trade, err := c.Query(ctx, "P-early"); err != nil || trade.Status != psp.StatusClosed || trade.Paid() {
		t.Fatalf("query: %+v %v, want CLOSED", trade, err)
	}
	if _, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P-early", Amount: 100}); !errors.Is(err, psp.ErrChargeClosed) {
		t.Fatalf("charge after the close: %v, want ErrChargeClosed", err)
	}
	if _, err := c.Query(ctx, "P-never"); !errors.Is(err, psp.ErrUnknownCharge) {
		t.Fatalf("query of an unknown trade: %v, want ErrUnknownCharge", err)
	}
	resp, err := http.Get(c.url + "/charges")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("query without out_trade_no: %d, want 400", resp.StatusCode)
	}
}

// TestRefundsAreMadeOncePerRefundNo: a refund is made once per refund_no (a
// repeat gets the same refund back and nothing is notified again), a
// repeat naming another payment or amount is refused, a refund beyond what
// was paid or of an unknown charge too; the notification is signed, verifies
// with the contract and is retried until the merchant answers 2xx.
func TestRefundsAreMadeOncePerRefundNo(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	rm := newRefundMerchant(t, func(n int) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, nil)
	ctx := context.Background()
	req := psp.RefundRequest{RefundNo: "R1", OutTradeNo: "P1", Amount: 4200, NotifyURL: rm.srv.URL}
	first, err := c.Refund(ctx, req)
	if err != nil || first.RefundSerial == "" || first.Amount != 4200 {
		t.Fatalf("refund: %+v %v", first, err)
	}
	again, err := c.Refund(ctx, req)
	if err != nil || again != first {
		t.Fatalf("the same refund_no again: %+v %v, want %+v", again, err, first)
	}
	for name, bad := range map[string]psp.RefundRequest{
		"the refund_no for another amount": {RefundNo: "R1", OutTradeNo: "P1", Amount: 100},
		"a second refund beyond the paid":  {RefundNo: "R2", OutTradeNo: "P1", Amount: 1},
		"no refund_no":                     {OutTradeNo: "P1", Amount: 1},
	} {
		if _, err := c.Refund(ctx, bad); !errors.Is(err, psp.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", name, err)
		}
	}
	if _, err := c.Refund(ctx, psp.RefundRequest{RefundNo: "R3", OutTradeNo: "P-none", Amount: 1}); !errors.Is(err, psp.ErrUnknownCharge) {
		t.Fatalf("refund of an unknown charge: %v, want ErrUnknownCharge", err)
	}
	wait(t, sim)
	got, errs := rm.received()
	if len(got) != 3 {
		t.Fatalf("%d refund notifications, want 3: two refused, then acknowledged, and none for the repeat", len(got))
	}
	for i, n := range got {
		if errs[i] != nil || n.RefundNo != "R1" || n.RefundSerial != first.RefundSerial || n.OutTradeNo != "P1" || n.Amount != 4200 || n.Channel != psp.Channel {
			t.Fatalf("notification %d: %+v (%v)", i, n, errs[i])
		}
	}
	r, ok := sim.GetRefund("R1")
	if !ok || r.Requests != 2 || !r.Acknowledged || len(r.Attempts) != 3 {
		t.Fatalf("refund %+v, want two requests, three attempts, acknowledged", r)
	}
	if got, _ := sim.Get(ch.Notification.PlatformSerial); got.Refunded != 4200 {
		t.Fatalf("charge refunded %d, want 4200", got.Refunded)
	}
}

// TestRefundNotificationsFollowTheChargesPlan: a refund of a charge
// delivered as a storm is notified as a storm too, signed the same way.
func TestRefundNotificationsFollowTheChargesPlan(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	rm := newRefundMerchant(t, func(int) int { return http.StatusOK })
	sim, c := startSim(t, config())
	charge(t, sim, c, m, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 6, Replays: 2})
	if _, err := c.Refund(context.Background(), psp.RefundRequest{RefundNo: "R1", OutTradeNo: "P1", Amount: 4200, NotifyURL: rm.srv.URL}); err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	if got, _ := rm.received(); len(got) != 8 {
		t.Fatalf("%d refund notifications, want the charge's 6 copies and 2 replays", len(got))
	}
}

// TestPlanForTheNextCharge: a lab that pays through the payment service
// cannot know the out_trade_no in advance; it files a plan for the next
// charge instead, which the next charge without a plan of its own takes
// (in filing order, one charge each), while a charge with its own plan
// keeps it. A request naming both, or neither, is refused.
func TestPlanForTheNextCharge(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	next := func(p pspsim.Plan) int {
		t.Helper()
		body, _ := json.Marshal(pspsim.PlanRequest{NextCharge: true, Plan: p})
		resp, err := admin.Post(c.url+"/sim/plans", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := next(pspsim.Plan{Mode: pspsim.ModeSilent}); status != http.StatusCreated {
		t.Fatalf("next-charge plan: %d", status)
	}
	if status := next(pspsim.Plan{Mode: pspsim.ModeHold}); status != http.StatusCreated {
		t.Fatalf("next-charge plan: %d", status)
	}
	if status := c.plan(t, "P-own", pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 2}); status != http.StatusCreated {
		t.Fatalf("own plan: %d", status)
	}
	ctx := context.Background()
	modes := map[string]string{}
	for _, no := range []string{"P-own", "P-a", "P-b", "P-c"} {
		resp, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: no, Amount: 100, NotifyURL: m.srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := sim.Get(resp.PlatformSerial)
		modes[no] = got.Plan.Mode
	}
	want := map[string]string{"P-own": pspsim.ModeStorm, "P-a": pspsim.ModeSilent, "P-b": pspsim.ModeHold, "P-c": pspsim.ModeNormal}
	if !reflect.DeepEqual(modes, want) {
		t.Fatalf("charges were delivered by %v, want %v", modes, want)
	}
	body, _ := json.Marshal(pspsim.PlanRequest{OutTradeNo: "P-x", NextCharge: true, Plan: pspsim.Plan{Mode: pspsim.ModeHold}})
	resp, err := admin.Post(c.url+"/sim/plans", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a plan for both: %d, want 400", resp.StatusCode)
	}
	if status := next(pspsim.Plan{Mode: "chaos"}); status != http.StatusBadRequest {
		t.Fatalf("a next-charge plan with an unknown mode: %d, want 400", status)
	}
	wait(t, sim)
}

// TestCloseRacesTheChargeItCloses: a close arriving while the charge of the
// same trade number is being accepted finds either no charge (closed
// before any charge: the charge is then refused) or the whole charge
// (answered paid). Before the charge was recorded in one critical section,
// a close could find the trade number without its charge, and the
// simulator panicked.
func TestCloseRacesTheChargeItCloses(t *testing.T) {
	cfg := config()
	cfg.Mode = pspsim.ModeSilent // no deliveries: only the charge and the close
	_, c := startSim(t, cfg)
	ctx := context.Background()
	for i := range 200 {
		no := fmt.Sprintf("PR%03d", i)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			charged error
			closed  psp.CloseResponse
			cerr    error
		)
		wg.Go(func() {
			<-start
			_, charged = c.Charge(ctx, psp.ChargeRequest{OutTradeNo: no, Amount: 100})
		})
		wg.Go(func() { <-start; closed, cerr = c.Close(ctx, no) })
		close(start)
		wg.Wait()
		switch {
		case cerr != nil:
			t.Fatalf("%s: close: %v", no, cerr)
		case closed.Status == psp.ClosePaid && (charged != nil || closed.PlatformSerial == ""):
			t.Fatalf("%s: close answered paid (%+v), the charge answered %v", no, closed, charged)
		case closed.Status == psp.CloseClosed && charged == nil:
			t.Fatalf("%s: close answered closed, yet the charge went through", no)
		case closed.Status != psp.ClosePaid && closed.Status != psp.CloseClosed:
			t.Fatalf("%s: close answered %+v", no, closed)
		}
	}
}

// TestSwitchesNeedTheAdminToken: a plan or a release without
// PSP_ADMIN_TOKEN, or with another token, is 401 and changes nothing (the
// next charge is delivered normally); with an empty token every switch is
// refused.
func TestSwitchesNeedTheAdminToken(t *testing.T) {
	sim, c := startSim(t, config())
	body := `{"next_charge":true,"mode":"silent"}`
	for name, header := range map[string]string{"none": "", "another token": "Bearer dev-admin-token", "not bearer": "dev-psp-admin-token"} {
		for _, path := range []string{"/sim/plans", "/sim/charges/P1/deliver"} {
			req, _ := http.NewRequest(http.MethodPost, c.url+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: POST %s: %d, want 401", name, path, resp.StatusCode)
			}
		}
	}
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	resp, err := c.Charge(context.Background(), psp.ChargeRequest{OutTradeNo: "P-after", Amount: 100, NotifyURL: m.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := sim.Get(resp.PlatformSerial); got.Plan.Mode != pspsim.ModeNormal {
		t.Fatalf("the refused plan was taken: the next charge is delivered %q", got.Plan.Mode)
	}
	wait(t, sim)

	cfg := config()
	cfg.AdminToken = ""
	_, open := startSim(t, cfg)
	if status := open.plan(t, "P2", pspsim.Plan{Mode: pspsim.ModeSilent}); status != http.StatusUnauthorized {
		t.Fatalf("with PSP_ADMIN_TOKEN empty: %d, want 401", status)
	}
}
