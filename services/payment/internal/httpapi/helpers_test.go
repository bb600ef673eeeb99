package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/apitest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// The contracts these tests hold the exchanges to: the payment routes'
// (docs/api/payment.yaml), for every request a test sends, and the
// simulator's (docs/api/psp-sim.yaml), for every call the service and the
// tests make to it.
var (
	spec    = apitest.MustLoad("payment.yaml")
	pspSpec = apitest.MustLoad("psp-sim.yaml")
)

// TestMain fails the package when an operation of payment.yaml is never
// exercised here, but for the routes pkg/platform serves and tests.
func TestMain(m *testing.M) {
	const platform = "served and tested by pkg/platform and pkg/httpserver, not by these handlers"
	apitest.Main(m, spec, map[string]string{
		"POST /admin/outbox/redrive": platform,
		"GET /healthz":               platform,
		"GET /readyz":                platform,
		"GET /metrics":               platform,
	})
}

// fixture is the payment service, run by paymenttest as main runs it over
// a throwaway database, with the platform simulator as a real HTTP peer.
type fixture struct {
	t   *testing.T
	svc *paymenttest.Service
	sim *pspsim.Simulator
	psp *psp.Client
	// logs holds everything the payment service logged, one JSON object
	// a line.
	logs *testenv.SyncBuffer
	// client sends the tests' requests, checked against spec.
	client *http.Client
	// callbackURL is the service's POST /payments/callback behind a proxy
	// that checks each notification and its answer against spec: the
	// notify_url of the charges the tests make. (The charges the service
	// makes itself name its own address, unchecked.)
	callbackURL string
}

func newFixture(t *testing.T, mode variant.Mode) *fixture {
	return buildFixture(t, paymenttest.Config{Mode: mode})
}

// newFixtureWithPlatform is a fixed-mode fixture whose POST /payments
// reaches the order service at orderURL; vars, when set, are more of the
// service's settings.
func newFixtureWithPlatform(t *testing.T, orderURL string, vars ...map[string]string) *fixture {
	c := paymenttest.Config{Vars: map[string]string{"ORDER_URL": orderURL}}
	for _, v := range vars {
		maps.Copy(c.Vars, v)
	}
	return buildFixture(t, c)
}

func buildFixture(t *testing.T, c paymenttest.Config) *fixture {
	return buildFixtureWithSimulator(t, c, paymentlab.SimulatorConfig())
}

// withLab is the lab's part of the service: every fixture has it, so that
// one fixture's counts (effects, snapshot) read either handler's records.
var withLab = paymenttest.Lab{Schema: &paymentlab.Schema, Plug: paymentlab.Plug}

// buildFixtureWithSimulator is buildFixture with a simulator configured as
// simCfg (its mode for charges without a plan, say).
func buildFixtureWithSimulator(t *testing.T, c paymenttest.Config, simCfg pspsim.Config) *fixture {
	t.Helper()
	sim, err := pspsim.New(simCfg, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(pspSpec.Handler(t, sim.Handler()))
	t.Cleanup(func() { sim.Close(); simSrv.Close() })
	url := simSrv.URL
	if c.Vars == nil {
		c.Vars = map[string]string{}
	}
	if _, ok := c.Vars["PSP_URL"]; !ok {
		c.Vars["PSP_URL"] = url
	}
	logs := &testenv.SyncBuffer{}
	c.Log = slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})
	c.Lab = withLab
	svc := paymenttest.Start(t, c)
	target, err := neturl.Parse(svc.URL)
	if err != nil {
		t.Fatal(err)
	}
	checked := httptest.NewServer(spec.Handler(t, httputil.NewSingleHostReverseProxy(target)))
	t.Cleanup(checked.Close)
	return &fixture{t: t, svc: svc, sim: sim, psp: psp.NewClient(url, http.DefaultClient), logs: logs,
		client: spec.Client(t), callbackURL: checked.URL + "/payments/callback"}
}

// proxy is an in-process handler that passes requests to the service.
func (f *fixture) proxy() http.Handler {
	target, err := neturl.Parse(f.svc.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(target)
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
	if _, err := paymentlab.InsertPayment(context.Background(), f.svc.Parts, no, 4200); err != nil {
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
	resp, err := f.psp.Charge(ctx, psp.ChargeRequest{OutTradeNo: outTradeNo, Amount: amount, NotifyURL: f.callbackURL})
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
	e, err := paymentlab.CountEffects(context.Background(), f.svc.DB, outTradeNo)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func (f *fixture) snapshot() paymentlab.Snapshot {
	f.t.Helper()
	s, err := paymentlab.TakeSnapshot(context.Background(), f.svc.DB)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// post sends body to path with headers and returns the status and body.
func (f *fixture) post(path string, body []byte, h http.Header) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.svc.URL+path, bytes.NewReader(body))
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
	req, err := http.NewRequest(http.MethodGet, f.svc.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return f.do(req)
}

func (f *fixture) do(req *http.Request) (int, []byte) {
	status, _, b := f.doFull(req)
	return status, b
}

// doFull sends req and returns the status, the headers and the body.
func (f *fixture) doFull(req *http.Request) (int, http.Header, []byte) {
	if user := req.Header.Get(signedInAs); user != "" {
		id, err := strconv.ParseUint(user, 10, 64)
		if err != nil {
			f.t.Fatal(err)
		}
		req.Header.Del(signedInAs)
		req.Header.Set("Authorization", "Bearer "+f.svc.Token(f.t, id))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
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

// callbacks returns payment_callbacks_total{handler, outcome} from the
// service's registry.
func (f *fixture) callbacks(handler, outcome string) float64 {
	f.t.Helper()
	return testenv.Metric(f.t, f.svc.Registry, "payment_callbacks_total", "handler", handler, "outcome", outcome)
}

// orderService stands in for the order service's GET /internal/orders/:no,
// the payment service's HTTP peer, speaking its contract: any order it has,
// whoever owns it (the payment service checks the owner), with its
// pay_amount; 404 for one it has not. It remembers the Authorization header
// of every call.
type orderService struct {
	*httptest.Server
	mu     sync.Mutex
	orders map[string]testOrder
	auth   []string
}

type testOrder struct {
	UserID    uint64
	PayAmount int64
	Status    string
}

func newOrderService(t *testing.T, orders map[string]testOrder) *orderService {
	t.Helper()
	s := &orderService{orders: orders}
	if s.orders == nil {
		s.orders = map[string]testOrder{}
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/internal/orders/:no", func(c *gin.Context) {
		s.mu.Lock()
		o, ok := s.orders[c.Param("no")]
		s.auth = append(s.auth, c.GetHeader("Authorization"))
		s.mu.Unlock()
		if !ok {
			problem.Abort(c, http.StatusNotFound, "order not found")
			return
		}
		c.JSON(http.StatusOK, gin.H{"order_no": c.Param("no"), "user_id": o.UserID, "status": o.Status, "pay_amount": o.PayAmount})
	})
	s.Server = httptest.NewServer(e)
	t.Cleanup(s.Close)
	return s
}

// set adds or replaces an order.
func (s *orderService) set(no string, o testOrder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[no] = o
}

// authorizations returns the Authorization headers of the calls so far.
func (s *orderService) authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// signedInAs is the test client's own header: a request carrying it (a user
// id) is sent with that customer's access token instead (doFull), as a
// signed-in client would.
const signedInAs = "X-Test-Signed-In-As"

// owner is the header of a request by user id, signed in.
func owner(id uint64) http.Header {
	return http.Header{signedInAs: {strconv.FormatUint(id, 10)}}
}

// payAs is POST /payments for orderNo by user id with a fresh key.
func (f *fixture) payAs(id uint64, orderNo string) (int, []byte) {
	f.t.Helper()
	h := owner(id)
	h.Set("Idempotency-Key", "key-"+testenv.RandomSuffix(12))
	return f.post("/payments", []byte(`{"order_no":"`+orderNo+`"}`), h)
}

// closeOrder is the order service's POST /internal/orders/:no/close; it
// returns the status and the outcome.
func (f *fixture) closeOrder(orderNo string) (int, string) {
	f.t.Helper()
	status, body := f.post("/internal/orders/"+orderNo+"/close", nil, http.Header{"Authorization": {"Bearer " + paymenttest.InternalToken}})
	var out struct {
		Outcome string `json:"outcome"`
	}
	_ = json.Unmarshal(body, &out)
	if status == http.StatusOK && out.Outcome == "" {
		f.t.Fatalf("close %s: 200 without an outcome: %s", orderNo, body)
	}
	return status, out.Outcome
}

// waitSim waits until every delivery the simulator started is over.
func (f *fixture) waitSim() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.sim.Wait(ctx); err != nil {
		f.t.Fatal(err)
	}
}

// paymentOf returns the payment of orderNo as stored.
func (f *fixture) paymentOf(orderNo string) payment.Payment {
	f.t.Helper()
	p, err := f.svc.Store.GetByOrder(context.Background(), orderNo)
	if err != nil {
		f.t.Fatalf("payment of order %s: %v", orderNo, err)
	}
	return p
}

// isProblem reports whether a response is application/problem+json.
func isProblem(h http.Header) bool {
	return strings.HasPrefix(h.Get("Content-Type"), problem.ContentType)
}
