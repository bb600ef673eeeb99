package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/payment/psp"
	"github.com/oncemall/oncemall/services/payment/pspsim"
)

// fixture is the payment service's HTTP stack over a throwaway database,
// with the platform simulator as a real HTTP peer.
type fixture struct {
	t   *testing.T
	rig *paymentlab.Rig
	sim *pspsim.Simulator
	psp *psp.Client
	// logs holds everything the payment service logged, one JSON object
	// a line.
	logs *testenv.SyncBuffer
}

func newFixture(t *testing.T, mode variant.Mode) *fixture {
	return buildFixture(t, paymentlab.RigConfig{Mode: mode})
}

// newFixtureWithPlatform is a fixed-mode fixture whose POST /payments
// reaches the order service at orderURL and the simulator.
func newFixtureWithPlatform(t *testing.T, orderURL string) *fixture {
	return buildFixture(t, paymentlab.RigConfig{Mode: variant.Fixed, OrderURL: orderURL})
}

func buildFixture(t *testing.T, rc paymentlab.RigConfig) *fixture {
	t.Helper()
	sim, url, stop, err := paymentlab.StartSimulator(lab.Env{Log: testenv.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if rc.OrderURL != "" {
		rc.PSPURL = url
	}
	db := testenv.DB(t, paymentlab.Migrations...)
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewMultiHandler(testenv.Logger(t).Handler(),
		slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	rig, err := paymentlab.NewRig(db, rc, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rig.Close)
	return &fixture{t: t, rig: rig, sim: sim, psp: psp.NewClient(url, http.DefaultClient), logs: logs}
}

// logged returns the service's log records whose key has value, each
// decoded from its JSON line.
func (f *fixture) logged(key, value string) []map[string]any {
	f.t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			f.t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		if rec[key] == value {
			out = append(out, rec)
		}
	}
	return out
}

// payment inserts a WAIT_PAY payment of 4200 cents.
func (f *fixture) payment() string {
	f.t.Helper()
	no := "P" + testenv.RandomSuffix(12)
	if _, err := f.rig.InsertPayment(context.Background(), no, 4200); err != nil {
		f.t.Fatal(err)
	}
	return no
}

// charge makes the simulator charge outTradeNo, delivered by plan when it is
// not nil, and waits until every delivery is over; it returns the charge
// with its attempts.
func (f *fixture) charge(outTradeNo string, amount int64, plan *pspsim.Plan) pspsim.Charge {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if plan != nil {
		if err := f.sim.SetPlan(outTradeNo, *plan); err != nil {
			f.t.Fatal(err)
		}
	}
	resp, err := f.psp.Charge(ctx, psp.ChargeRequest{OutTradeNo: outTradeNo, Amount: amount, NotifyURL: f.rig.CallbackURL})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.sim.Wait(ctx); err != nil {
		f.t.Fatal(err)
	}
	c, _ := f.sim.Get(resp.PlatformSerial)
	return c
}

func (f *fixture) effects(outTradeNo string) paymentlab.Effects {
	f.t.Helper()
	e, err := f.rig.Effects(context.Background(), outTradeNo)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func (f *fixture) snapshot() paymentlab.Snapshot {
	f.t.Helper()
	s, err := f.rig.Snapshot(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// post sends body to path with headers and returns the status and body.
func (f *fixture) post(path string, body []byte, h http.Header) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.rig.Server.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return f.do(req)
}

func (f *fixture) get(path string, h http.Header) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.rig.Server.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return f.do(req)
}

func (f *fixture) do(req *http.Request) (int, []byte) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// signedCallback returns a notification body and its valid signature headers.
func signedCallback(t testing.TB, n psp.Notification) ([]byte, http.Header) {
	t.Helper()
	body, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	psp.SignHeaders(h, []byte(paymentlab.DevSecret), time.Now(), body)
	return body, h
}

func notification(outTradeNo, serial string, amount int64) psp.Notification {
	return psp.Notification{Channel: psp.Channel, PlatformSerial: serial, OutTradeNo: outTradeNo, Amount: amount,
		TradeStatus: psp.TradeSuccess, PaidAt: time.Now().UTC().Truncate(time.Millisecond)}
}

// statuses lists the merchant's answers to a charge's deliveries.
func statuses(c pspsim.Charge) []int {
	out := make([]int, 0, len(c.Attempts))
	for _, a := range c.Attempts {
		out = append(out, a.Status)
	}
	return out
}

func nowFunc() time.Time { return time.Now() }

// callbacks returns payment_callbacks_total{handler, outcome} from the rig's
// registry.
func (f *fixture) callbacks(handler, outcome string) float64 {
	f.t.Helper()
	mfs, err := f.rig.Registry.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "payment_callbacks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["handler"] == handler && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
