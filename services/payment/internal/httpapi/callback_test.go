package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// TestCallbackRejectionsChangeNothing drives every refused notification
// through the real HTTP stack and checks the documented status on every
// delivery and that no table changed. The platform keeps retrying refused
// notifications, so each case also proves that the retries change nothing.
func TestCallbackRejectionsChangeNothing(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	no := f.payment()

	// Refusals the platform simulator produces as a real peer.
	// The platform keys charges by out_trade_no, so each case charges a
	// payment of its own.
	simCases := []struct {
		name       string
		outTradeNo string
		mode       string
		want       int
	}{
		{"bad signature", f.payment(), pspsim.ModeBadSignature, http.StatusUnauthorized},
		{"stale timestamp", f.payment(), pspsim.ModeStaleTimestamp, http.StatusUnauthorized},
		{"wrong amount", no, pspsim.ModeWrongAmount, http.StatusUnprocessableEntity},
		{"unknown out_trade_no", "P-nobody-knows", pspsim.ModeNormal, http.StatusNotFound},
	}
	for _, tc := range simCases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot()
			c := f.charge(tc.outTradeNo, 4200, &pspsim.Plan{Mode: tc.mode})
			if c.Acknowledged || len(c.Attempts) != 4 {
				t.Fatalf("attempts %v: want 4 refused deliveries (first try + 3 retries)", statuses(c))
			}
			for _, a := range c.Attempts {
				if a.Status != tc.want {
					t.Fatalf("statuses %v, want all %d", statuses(c), tc.want)
				}
			}
			if after := f.snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("tables changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}

	// Every refused delivery is counted by its reason.
	for outcome, want := range map[string]float64{"bad_signature": 4, "stale_timestamp": 4, "amount_mismatch": 4, "unknown_payment": 4, "processed": 0} {
		if got := f.callbacks("fixed", outcome); got != want {
			t.Errorf("payment_callbacks_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	// A wrong amount is more than a refusal: the platform says it collected
	// another sum than the payment asks, so each delivery is also logged as
	// an alert, at error level, naming the payment and both amounts. No
	// other refusal raises that alert.
	alerts := f.logged("alert", "payment_amount_mismatch")
	if len(alerts) != 4 {
		t.Fatalf("%d log lines with alert=payment_amount_mismatch, want one per wrong-amount delivery (4):\n%s", len(alerts), f.logs.String())
	}
	for _, a := range alerts {
		if a["level"] != "ERROR" || a["out_trade_no"] != no || a["expected"] != 4200.0 || a["notified"] != 4201.0 || a["platform_serial"] == "" {
			t.Fatalf("amount mismatch alert %v: want level ERROR, out_trade_no %s, expected 4200, notified 4201 and the serial", a, no)
		}
	}

	// Refusals only a broken or hostile sender produces, signed correctly.
	valid := notification(no, "T-direct-1", 4200)
	malformed := []struct {
		name string
		body func() []byte
		want int
	}{
		{"not JSON", func() []byte { return []byte(`{"out_trade_no":`) }, http.StatusBadRequest},
		{"missing serial", func() []byte { n := valid; n.PlatformSerial = ""; b, _ := json.Marshal(n); return b }, http.StatusBadRequest},
		{"unknown channel", func() []byte { n := valid; n.Channel = "other"; b, _ := json.Marshal(n); return b }, http.StatusBadRequest},
		{"not a success", func() []byte { n := valid; n.TradeStatus = "CLOSED"; b, _ := json.Marshal(n); return b }, http.StatusBadRequest},
		{"zero amount", func() []byte { n := valid; n.Amount = 0; b, _ := json.Marshal(n); return b }, http.StatusBadRequest},
	}
	for _, tc := range malformed {
		t.Run("malformed body: "+tc.name, func(t *testing.T) {
			before := f.snapshot()
			body := tc.body()
			h := http.Header{}
			psp.SignHeaders(h, []byte("dev-psp-secret-not-for-production"), nowFunc(), body)
			status, resp := f.post("/payments/callback", body, h)
			if status != tc.want || !strings.Contains(string(resp), `"status":`) {
				t.Fatalf("status %d body %s, want %d problem+json", status, resp, tc.want)
			}
			if after := f.snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatalf("tables changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
	t.Run("no signature headers", func(t *testing.T) {
		before := f.snapshot()
		body, _ := json.Marshal(valid)
		if status, _ := f.post("/payments/callback", body, nil); status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", status)
		}
		if after := f.snapshot(); !reflect.DeepEqual(before, after) {
			t.Fatalf("tables changed")
		}
	})

	// After all that, the payment is still waiting and a genuine
	// notification still pays it.
	if e := f.effects(no); e.Status != "WAIT_PAY" || e.Records != 0 || e.Events != 0 {
		t.Fatalf("payment after refusals: %+v", e)
	}
	body, h := signedCallback(t, notification(no, "T-genuine", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusOK {
		t.Fatalf("genuine notification refused: %d %s", status, b)
	}
	if e := f.effects(no); e.Status != "PAID" || e.Records != 1 || e.Events != 1 {
		t.Fatalf("payment after a genuine notification: %+v", e)
	}
}

// TestFixedCallbackConcurrentCopiesHaveOneWinner races 100 identical
// notifications at the fixed handler: all are acknowledged, exactly one is
// processed, and the database holds one record and one event.
func TestFixedCallbackConcurrentCopiesHaveOneWinner(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	no := f.payment()
	body, h := signedCallback(t, notification(no, "T-race-1", 4200))

	const n = 100
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]struct {
		status int
		body   string
	}, n)
	for i := range n {
		wg.Go(func() {
			<-start
			s, b := f.post("/payments/callback", body, h)
			results[i].status, results[i].body = s, string(b)
		})
	}
	close(start)
	wg.Wait()

	processed := 0
	for _, r := range results {
		if r.status != http.StatusOK {
			t.Fatalf("a copy was answered %d %s; every copy must be acknowledged", r.status, r.body)
		}
		if strings.Contains(r.body, `"outcome":"processed"`) {
			processed++
		}
	}
	e := f.effects(no)
	if processed != 1 || e.Records != 1 || e.Events != 1 || e.Status != "PAID" {
		t.Fatalf("processed answers %d, effects %+v; want exactly one of each", processed, e)
	}
}

// TestFixedCallbackReplayAndOutOfOrder: replays after success and an older
// copy delivered late are acknowledged as duplicates without effect.
func TestFixedCallbackReplayAndOutOfOrder(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	for _, mode := range []string{pspsim.ModeReplay, pspsim.ModeOutOfOrder} {
		t.Run(mode, func(t *testing.T) {
			no := f.payment()
			c := f.charge(no, 4200, &pspsim.Plan{Mode: mode, Replays: 5})
			for _, a := range c.Attempts {
				if a.Status != http.StatusOK {
					t.Fatalf("statuses %v, want every delivery acknowledged", statuses(c))
				}
			}
			if len(c.Attempts) < 2 {
				t.Fatalf("only %d deliveries", len(c.Attempts))
			}
			if e := f.effects(no); e.Records != 1 || e.Events != 1 || e.Status != "PAID" {
				t.Fatalf("effects %+v, want one record and one event", e)
			}
		})
	}
}

// TestFixedCallbackConflict: a valid notification of ANOTHER platform
// transaction for an already paid payment is refused with 409 and changes
// nothing (a double charge is for a human and a refund, not for a second
// payment.succeeded).
func TestFixedCallbackConflict(t *testing.T) {
	f := newFixture(t, variant.Fixed)
	no := f.payment()
	body, h := signedCallback(t, notification(no, "T-first", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusOK {
		t.Fatalf("first notification: %d %s", status, b)
	}
	before := f.snapshot()
	body, h = signedCallback(t, notification(no, "T-second", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusConflict {
		t.Fatalf("second transaction: %d %s, want 409", status, b)
	}
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("tables changed:\nbefore %+v\nafter  %+v", before, after)
	}
	// The first transaction's own redelivery is still a duplicate (200).
	body, h = signedCallback(t, notification(no, "T-first", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusOK || !strings.Contains(string(b), "duplicate") {
		t.Fatalf("redelivery of the first: %d %s", status, b)
	}
}

// TestBrokenCallbackRecordsTheStormTwice is the reproduction through the HTTP
// stack: the same storms the fixed handler survives leave the broken handler
// with several records and events. Three storms, because on a loaded machine
// an occasional storm arrives too spread out to race (see lab.Storms).
func TestBrokenCallbackRecordsTheStormTwice(t *testing.T) {
	f := newFixture(t, variant.Broken)
	worst := 0
	for range 3 {
		no := f.payment()
		f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 50, Replays: 10})
		e := f.effects(no)
		if e.Records != e.Events {
			t.Fatalf("broken handler: %d records but %d events", e.Records, e.Events)
		}
		worst = max(worst, e.Records)
	}
	if worst < 2 {
		t.Fatal("three storms left one record each; the broken handler must record a stormed payment more than once")
	}
}
