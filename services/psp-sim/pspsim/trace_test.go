package pspsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// headerMerchant answers 200 to every notification and keeps the trace
// headers each one came with.
type headerMerchant struct {
	mu      sync.Mutex
	parents []string // traceparent of each delivery, in arrival order
	baggage []string
	ids     []string // X-Request-ID
}

func (m *headerMerchant) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.parents = append(m.parents, r.Header.Get("traceparent"))
	m.baggage = append(m.baggage, r.Header.Get("baggage"))
	m.ids = append(m.ids, r.Header.Get(tracing.RequestIDHeader))
	m.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// chargeTraced charges P1 at the simulator cfg describes, as the payment
// service does: from a span of the caller's, through a client that carries
// the trace, with request_id in the baggage. It returns the charge once its
// deliveries are done, and the merchant that received them.
func chargeTraced(t *testing.T, cfg pspsim.Config, rec *spantest.Recorder, plan pspsim.Plan) (pspsim.Charge, *headerMerchant) {
	t.Helper()
	m := &headerMerchant{}
	msrv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(msrv.Close)
	sim, c := startSim(t, cfg)
	if status := c.plan(t, "P1", plan); status != http.StatusCreated {
		t.Fatalf("POST /sim/plans: %d", status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ctx = tracing.WithRequestID(ctx, "req-pay-1")
	ctx, span := rec.Provider.Tracer("test").Start(ctx, "pay")
	client := psp.NewClient(c.url, &http.Client{Transport: tracing.Transport(rec.Provider, http.DefaultTransport)})
	resp, err := client.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P1", Amount: 4200, NotifyURL: msrv.URL})
	span.End()
	if err != nil {
		t.Fatalf("charge: %v", err)
	}
	wait(t, sim)
	ch, ok := sim.Get(resp.PlatformSerial)
	if !ok || !ch.Done {
		t.Fatalf("charge %s unknown or not done", resp.PlatformSerial)
	}
	return ch, m
}

// TestNotificationsAreDeliveredInTheChargesTrace: a storm of 3 copies, one
// lost answer (so one copy is retried) and 2 late replays, for a charge
// that came in a trace. The charge request is a server span under the
// caller's; every delivery attempt is a client span of its own under it,
// all but the first marked duplicate=true, each carrying its own
// traceparent and the caller's request_id (in the baggage and as
// X-Request-ID) to the merchant.
func TestNotificationsAreDeliveredInTheChargesTrace(t *testing.T) {
	rec := spantest.NewRecorder(t)
	cfg := config()
	cfg.TracerProvider = rec.Provider
	ch, m := chargeTraced(t, cfg, rec, pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 3, Replays: 2, LostAnswers: 1})

	spans := rec.Spans()
	pay := spantest.Find(t, spans, "pay")
	chargeSpan := spantest.Find(t, spans, "POST /charges")
	if chargeSpan.Kind != "server" || chargeSpan.TraceID != pay.TraceID {
		t.Fatalf("charge span %s, want a server span in the caller's trace %s", chargeSpan, pay.TraceID)
	}
	deliveries := spantest.Named(spans, "notify payment")
	if len(ch.Attempts) != 3+2+1 || len(deliveries) != len(ch.Attempts) {
		t.Fatalf("%d attempts, %d delivery spans; want 6 of each (3 copies, 1 retry, 2 replays):\n%s", len(ch.Attempts), len(deliveries), spantest.List(spans))
	}
	firsts, lost := 0, 0
	ids := map[string]bool{}
	for _, d := range deliveries {
		spantest.ChildOf(t, d, chargeSpan)
		if d.Kind != "client" || d.Attrs["psp.serial"] != ch.Notification.PlatformSerial || d.Attrs["http.response.status_code"] != "200" || d.Attrs["request_id"] != "req-pay-1" {
			t.Fatalf("delivery span %s, want a client span of serial %s answered 200", d, ch.Notification.PlatformSerial)
		}
		first := d.Attrs["psp.copy"] == "0" && d.Attrs["psp.try"] == "1"
		if first {
			firsts++
		}
		if want := map[bool]string{true: "false", false: "true"}[first]; d.Attrs["duplicate"] != want {
			t.Fatalf("delivery span %s: duplicate=%s, want %s", d, d.Attrs["duplicate"], want)
		}
		if d.Attrs["psp.answer_lost"] == "true" {
			lost++
		}
		ids[d.SpanID] = true
	}
	if firsts != 1 || lost != 1 {
		t.Fatalf("%d first deliveries and %d lost answers among the spans, want 1 and 1:\n%s", firsts, lost, spantest.List(deliveries))
	}

	// Each delivery told the merchant which span it was.
	if len(m.parents) != len(deliveries) {
		t.Fatalf("merchant got %d deliveries, want %d", len(m.parents), len(deliveries))
	}
	for i, tp := range m.parents {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != pay.TraceID || !ids[parts[2]] {
			t.Fatalf("delivery %d came with traceparent %q, want the trace %s and one of the delivery spans", i, tp, pay.TraceID)
		}
		delete(ids, parts[2])
		if m.baggage[i] != "request_id=req-pay-1" || m.ids[i] != "req-pay-1" {
			t.Fatalf("delivery %d came with baggage %q and request id %q, want the caller's request_id", i, m.baggage[i], m.ids[i])
		}
	}
}

// TestUntracedSimulatorSendsNoTraceHeaders: without a tracer provider, the
// simulator neither continues the caller's trace nor invents one.
func TestUntracedSimulatorSendsNoTraceHeaders(t *testing.T) {
	rec := spantest.NewRecorder(t)
	_, m := chargeTraced(t, config(), rec, pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 2})
	if n := len(spantest.Named(rec.Spans(), "POST /charges")); n != 0 {
		t.Fatalf("%d simulator spans without a provider", n)
	}
	for i, tp := range m.parents {
		if tp != "" || m.baggage[i] != "" || m.ids[i] != "" {
			t.Fatalf("delivery %d came with traceparent %q baggage %q request id %q, want none", i, tp, m.baggage[i], m.ids[i])
		}
	}
}
