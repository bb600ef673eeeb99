package pspsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

const secret = "test-secret"

// merchant is a real HTTP peer standing in for the payment service: it
// verifies every notification and answers what answer says.
type merchant struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	inFly  atomic.Int32
	maxFly atomic.Int32
	answer func(n int, r received) int // n counts requests from 1
	delay  func(n int) time.Duration
}

type received struct {
	n         psp.Notification
	verifyErr error
	nonce     string
	timestamp int64 // X-PSP-Timestamp, Unix seconds
	at        time.Time
}

func newMerchant(t *testing.T, answer func(n int, r received) int) *merchant {
	m := &merchant{t: t, answer: answer}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *merchant) serve(w http.ResponseWriter, r *http.Request) {
	fly := m.inFly.Add(1)
	defer m.inFly.Add(-1)
	for {
		max := m.maxFly.Load()
		if fly <= max || m.maxFly.CompareAndSwap(max, fly) {
			break
		}
	}
	body, _ := io.ReadAll(r.Body)
	rec := received{verifyErr: psp.Verify(r.Header, body, []byte(secret), time.Now(), 5*time.Minute), nonce: r.Header.Get(psp.HeaderNonce), at: time.Now()}
	ts, err := strconv.ParseInt(r.Header.Get(psp.HeaderTimestamp), 10, 64)
	if err != nil {
		m.t.Errorf("merchant: %s %q is not Unix seconds", psp.HeaderTimestamp, r.Header.Get(psp.HeaderTimestamp))
	}
	rec.timestamp = ts
	if err := json.Unmarshal(body, &rec.n); err != nil {
		m.t.Errorf("merchant: undecodable notification: %v", err)
	}
	m.mu.Lock()
	m.got = append(m.got, rec)
	n := len(m.got)
	m.mu.Unlock()
	if m.delay != nil {
		time.Sleep(m.delay(n))
	}
	w.WriteHeader(m.answer(n, rec))
}

func (m *merchant) received() []received {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]received(nil), m.got...)
}

func config() pspsim.Config {
	var c pspsim.Config
	if err := pkgconfig.LoadFrom(&c, func(string) (string, bool) { return "", false }); err != nil {
		panic(err)
	}
	c.Secret = secret
	c.RetrySchedule = []string{"10ms", "20ms", "30ms"}
	c.NotifyDelay = 0
	return c
}

// wait blocks until every delivery the simulator started has finished, and
// fails the test after waitTimeout.
func wait(t *testing.T, sim *pspsim.Simulator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := sim.Wait(ctx); err != nil {
		t.Fatalf("deliveries did not finish: %v", err)
	}
}

// peer is the simulator as the merchant and a lab reach it over HTTP: the
// platform contract's client (psp.Client), and the lab's POST /sim/plans.
type peer struct {
	*psp.Client
	url string
}

// plan files p for the next charge of outTradeNo through POST /sim/plans
// and returns the status the simulator answered.
func (p peer) plan(t *testing.T, outTradeNo string, plan pspsim.Plan) int {
	t.Helper()
	body, err := json.Marshal(pspsim.PlanRequest{OutTradeNo: outTradeNo, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Post(p.url+"/sim/plans", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// admin is an HTTP client of the simulator's switches: it sends the
// default PSP_ADMIN_TOKEN (config's) as a bearer token.
var admin = &http.Client{Transport: bearer{token: "dev-psp-admin-token", next: http.DefaultTransport}}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// startSim serves a simulator on a real loopback listener.
func startSim(t *testing.T, cfg pspsim.Config) (*pspsim.Simulator, peer) {
	t.Helper()
	sim, err := pspsim.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(spec.Handler(t, sim.Handler()))
	t.Cleanup(func() { sim.Close(); srv.Close() })
	return sim, peer{Client: psp.NewClient(srv.URL, srv.Client()), url: srv.URL}
}

// waitTimeout bounds every wait for the simulator's deliveries, so that a
// bug fails the test instead of hanging it.
const waitTimeout = 20 * time.Second

// charge charges P1 and waits until its deliveries are over; with a plan,
// it files the plan for P1 over HTTP first.
func charge(t *testing.T, sim *pspsim.Simulator, c peer, m *merchant, plan *pspsim.Plan) pspsim.Charge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if plan != nil {
		if status := c.plan(t, "P1", *plan); status != http.StatusCreated {
			t.Fatalf("POST /sim/plans %+v: %d, want 201", *plan, status)
		}
	}
	resp, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P1", Amount: 4200, NotifyURL: m.srv.URL})
	if err != nil {
		t.Fatalf("charge: %v", err)
	}
	wait(t, sim)
	got, ok := sim.Get(resp.PlatformSerial)
	if !ok || !got.Done {
		t.Fatalf("charge %s unknown or not done: %+v", resp.PlatformSerial, got)
	}
	return got
}

func TestDefaultConfigIsValid(t *testing.T) {
	var c pspsim.Config
	if err := pkgconfig.LoadFrom(&c, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.HTTPAddr != ":8090" || c.CallbackURL != "http://127.0.0.1:8083/payments/callback" ||
		c.RefundCallbackURL != "http://127.0.0.1:8083/payments/refunds/callback" || !strings.HasPrefix(c.Secret, "dev-") {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	c := config()
	c.RetrySchedule = []string{"1s", "soon"}
	c.Mode = "chaos"
	c.LostAnswers = -1
	c.CallbackURL = "payment:8083/payments/callback"
	c.RefundCallbackURL = ""
	err := c.Validate()
	var ce *pkgconfig.Error
	for _, v := range []string{"PSP_RETRY_SCHEDULE", "PSP_MODE", "PSP_LOST_ANSWERS", "PSP_CALLBACK_URL", "PSP_REFUND_CALLBACK_URL"} {
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), v) {
			t.Fatalf("Validate = %v, want an error naming %s", err, v)
		}
	}
	// Every mode, the lab's hold, silent and close_race included, is a
	// valid PSP_MODE.
	for _, mode := range pspsim.Modes {
		c := config()
		c.Mode = mode
		if err := c.Validate(); err != nil {
			t.Errorf("PSP_MODE=%s: %v", mode, err)
		}
	}
}

// TestConfigBoundsAreTheChargeBounds: a configured storm, replay count or
// lost-answer count that a charge could not name is refused at start-up,
// naming its variable, instead of passing Validate and then having every
// charge that names no mode refused with 400.
func TestConfigBoundsAreTheChargeBounds(t *testing.T) {
	over := pspsim.MaxPerCharge + 1
	for _, tc := range []struct {
		name string
		set  func(*pspsim.Config)
	}{
		{"PSP_STORM_COPIES", func(c *pspsim.Config) { c.StormCopies = over }},
		{"PSP_STORM_COPIES", func(c *pspsim.Config) { c.StormCopies = 0 }},
		{"PSP_REPLAYS", func(c *pspsim.Config) { c.Replays = over }},
		{"PSP_REPLAYS", func(c *pspsim.Config) { c.Replays = -1 }},
		{"PSP_LOST_ANSWERS", func(c *pspsim.Config) { c.LostAnswers = over }},
		{"PSP_LOST_ANSWERS", func(c *pspsim.Config) { c.LostAnswers = -1 }},
	} {
		c := config()
		tc.set(&c)
		var ce *pkgconfig.Error
		if err := c.Validate(); !errors.As(err, &ce) || ce.Var != tc.name {
			t.Errorf("Validate with %s out of bounds = %v, want an error naming %s", tc.name, err, tc.name)
		}
	}
	c := config()
	c.StormCopies, c.Replays, c.LostAnswers = pspsim.MaxPerCharge, pspsim.MaxPerCharge, pspsim.MaxPerCharge
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate at the bounds = %v", err)
	}

	// The same bounds for a plan that names them, and a plan needs a
	// known mode and the payment it is for.
	_, client := startSim(t, config())
	for i, p := range []pspsim.Plan{
		{Mode: pspsim.ModeStorm, Copies: over},
		{Mode: pspsim.ModeReplay, Replays: over},
		{Mode: pspsim.ModeNormal, LostAnswers: over},
		{Copies: -1},
		{Mode: "chaos"},
	} {
		if status := client.plan(t, "P"+strconv.Itoa(i), p); status != http.StatusBadRequest {
			t.Errorf("plan %+v: %d, want 400", p, status)
		}
	}
	if status := client.plan(t, "", pspsim.Plan{Mode: pspsim.ModeStorm}); status != http.StatusBadRequest {
		t.Errorf("plan without out_trade_no: %d, want 400", status)
	}
}

func TestRetriesUntilAcknowledged(t *testing.T) {
	m := newMerchant(t, func(n int, _ received) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, nil)

	got := m.received()
	if len(got) != 3 || !ch.Acknowledged || len(ch.Attempts) != 3 {
		t.Fatalf("merchant got %d deliveries, charge %d attempts (acknowledged %v); want 3, 3, true", len(got), len(ch.Attempts), ch.Acknowledged)
	}
	nonces := map[string]bool{}
	for i, r := range got {
		if r.verifyErr != nil {
			t.Fatalf("delivery %d does not verify: %v", i+1, r.verifyErr)
		}
		nonces[r.nonce] = true
		if r.n.PlatformSerial != ch.Notification.PlatformSerial || r.n.OutTradeNo != "P1" || r.n.Amount != 4200 || r.n.Channel != psp.Channel {
			t.Fatalf("delivery %d carries %+v", i+1, r.n)
		}
	}
	if len(nonces) != 3 {
		t.Fatalf("retries reuse nonces: %d distinct of 3", len(nonces))
	}
	// The second wait of the schedule (20ms) separates the 2nd and 3rd try.
	if gap := got[2].at.Sub(got[1].at); gap < 20*time.Millisecond {
		t.Fatalf("third try came %v after the second, before the schedule's 20ms", gap)
	}
}

func TestTimeoutCountsAsFailure(t *testing.T) {
	cfg := config()
	cfg.NotifyTimeout = 100 * time.Millisecond
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	m.delay = func(n int) time.Duration {
		if n == 1 {
			return 400 * time.Millisecond // longer than the platform waits
		}
		return 0
	}
	sim, c := startSim(t, cfg)
	ch := charge(t, sim, c, m, nil)
	if len(ch.Attempts) != 2 || ch.Attempts[0].Error == "" || ch.Attempts[1].Status != http.StatusOK {
		t.Fatalf("attempts = %+v, want a timed-out first try and an acknowledged retry", ch.Attempts)
	}
}

func TestRetriesStopWhenTheScheduleIsExhausted(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusServiceUnavailable })
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, nil)
	if want := 1 + 3; len(m.received()) != want || ch.Acknowledged {
		t.Fatalf("merchant got %d deliveries (acknowledged %v), want %d: the first and one per scheduled retry", len(m.received()), ch.Acknowledged, want)
	}
}

func TestStormSendsConcurrentCopiesThenLateRetries(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	// Hold each answer a little, so overlapping deliveries are observable.
	m.delay = func(int) time.Duration { return 20 * time.Millisecond }
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 20, Replays: 5})

	got := m.received()
	if len(got) != 25 || len(ch.Attempts) != 25 {
		t.Fatalf("merchant got %d deliveries, want 20 concurrent + 5 late", len(got))
	}
	if m.maxFly.Load() < 5 {
		t.Fatalf("at most %d deliveries overlapped; a storm must send its copies at once", m.maxFly.Load())
	}
	serials := map[string]bool{}
	for _, r := range got {
		serials[r.n.PlatformSerial] = true
		if r.verifyErr != nil {
			t.Fatalf("storm copy does not verify: %v", r.verifyErr)
		}
	}
	if len(serials) != 1 {
		t.Fatalf("storm copies carry %d serials, want the same notification", len(serials))
	}
}

// TestConfiguredStormSendsLateRetriesToo: a charge without a plan (what the
// payment service's charges are) in PSP_MODE=storm gets the story's storm:
// PSP_STORM_COPIES concurrent copies, then PSP_REPLAYS late retries, and
// PSP_LOST_ANSWERS lost answers. A charge whose plan names its storm gets
// exactly what it names, and none of the configured lost answers.
func TestConfiguredStormSendsLateRetriesToo(t *testing.T) {
	cfg := config()
	cfg.Mode, cfg.StormCopies, cfg.Replays, cfg.LostAnswers = pspsim.ModeStorm, 6, 3, 1
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, cfg)

	ch := charge(t, sim, c, m, nil)
	if tl := ch.Tally(); len(m.received()) != 10 || tl.Copies != 6+3 || tl.Lost != 1 || tl.Attempts != 10 || ch.Plan.Replays != 3 {
		t.Fatalf("merchant got %d deliveries, tally %+v (plan %+v); want 6 concurrent + 3 late copies, 1 answer lost and retried",
			len(m.received()), tl, ch.Plan)
	}

	if status := c.plan(t, "P2", pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 4}); status != http.StatusCreated {
		t.Fatalf("POST /sim/plans: %d", status)
	}
	if _, err := c.Charge(context.Background(), psp.ChargeRequest{OutTradeNo: "P2", Amount: 4200, NotifyURL: m.srv.URL}); err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	if got := len(m.received()) - 10; got != 4 {
		t.Fatalf("a named storm of 4 copies made %d deliveries, want 4: no late retries, no lost answers", got)
	}
}

// TestChargeSettings is the one rule for a charge's plan: a charge without
// a plan, or whose plan names no mode, gets the configured mode and its
// settings (storm copies, late retries, lost answers) wherever the plan
// leaves them zero; a plan that names its mode gets exactly what it names,
// nothing configured.
// PSP_REPLAYS=0 makes a configured storm without late retries.
func TestChargeSettings(t *testing.T) {
	storm := func(c *pspsim.Config) { c.Mode, c.StormCopies, c.Replays, c.LostAnswers = pspsim.ModeStorm, 5, 2, 1 }
	for _, tc := range []struct {
		name string
		cfg  func(*pspsim.Config)
		plan *pspsim.Plan
		want pspsim.Plan
	}{
		{"no plan, configured storm", storm, nil,
			pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 5, Replays: 2, LostAnswers: 1}},
		{"no mode, configured storm", storm, &pspsim.Plan{},
			pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 5, Replays: 2, LostAnswers: 1}},
		{"no mode, own copies", storm, &pspsim.Plan{Copies: 3},
			pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 3, Replays: 2, LostAnswers: 1}},
		{"named storm", storm, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 4},
			pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 4}},
		{"named storm with its own lost answers", storm, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 4, LostAnswers: 2},
			pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 4, LostAnswers: 2}},
		{"named normal", storm, &pspsim.Plan{Mode: pspsim.ModeNormal},
			pspsim.Plan{Mode: pspsim.ModeNormal, Copies: 1}},
		{"configured storm without late retries", func(c *pspsim.Config) { storm(c); c.Replays = 0 }, nil,
			pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 5, LostAnswers: 1}},
		{"configured replay", func(c *pspsim.Config) { storm(c); c.Mode = pspsim.ModeReplay }, nil,
			pspsim.Plan{Mode: pspsim.ModeReplay, Copies: 1, Replays: 2, LostAnswers: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config()
			tc.cfg(&cfg)
			m := newMerchant(t, func(int, received) int { return http.StatusOK })
			sim, c := startSim(t, cfg)
			ch := charge(t, sim, c, m, tc.plan)
			if ch.Plan != tc.want {
				t.Fatalf("plan %+v, want %+v", ch.Plan, tc.want)
			}
			// Every copy and late retry is delivered once, and each lost
			// answer once more.
			if want := tc.want.Copies + tc.want.Replays + tc.want.LostAnswers; len(m.received()) != want {
				t.Fatalf("merchant got %d deliveries, want %d", len(m.received()), want)
			}
		})
	}
}

// TestLostAnswersAreRetried: the merchant answers every delivery 200, but
// the platform loses the answer to the first attempt and, not knowing the
// merchant processed it, retries it: the retry carries the same
// notification, freshly signed.
func TestLostAnswersAreRetried(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, &pspsim.Plan{Mode: pspsim.ModeNormal, LostAnswers: 1})

	got := m.received()
	if len(got) != 2 || len(ch.Attempts) != 2 || !ch.Acknowledged {
		t.Fatalf("merchant got %d deliveries, charge %+v; want the lost one and its acknowledged retry", len(got), ch)
	}
	first, retry := ch.Attempts[0], ch.Attempts[1]
	if !first.AnswerLost || first.Status != http.StatusOK || first.Error == "" || first.Try != 1 {
		t.Fatalf("first attempt %+v: want the merchant's 200, lost, with the reason", first)
	}
	if retry.AnswerLost || retry.Status != http.StatusOK || retry.Try != 2 || retry.Copy != first.Copy {
		t.Fatalf("retry %+v: want try 2 of the same copy, acknowledged", retry)
	}
	if got[0].n != got[1].n || got[0].nonce == got[1].nonce || got[1].verifyErr != nil {
		t.Fatalf("retry is not the same notification re-signed: %+v / %+v", got[0], got[1])
	}
}

// TestOnlyAnAnswerCanBeLost: a refusal is not an answer the platform can
// lose, so lost_answers waits for the first 2xx: the merchant refuses the
// first delivery with 503, its 200 to the retry is lost, and the platform
// retries once more, the notification now processed.
func TestOnlyAnAnswerCanBeLost(t *testing.T) {
	m := newMerchant(t, func(n int, _ received) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, &pspsim.Plan{Mode: pspsim.ModeNormal, LostAnswers: 1})

	want := []struct {
		try, status int
		lost        bool
	}{{1, http.StatusServiceUnavailable, false}, {2, http.StatusOK, true}, {3, http.StatusOK, false}}
	if len(ch.Attempts) != len(want) || !ch.Acknowledged {
		t.Fatalf("attempts %+v (acknowledged %v): want the refusal, the lost 200 and an acknowledged retry", ch.Attempts, ch.Acknowledged)
	}
	for i, w := range want {
		a := ch.Attempts[i]
		if a.Try != w.try || a.Status != w.status || a.AnswerLost != w.lost {
			t.Fatalf("attempt %d = %+v, want try %d, status %d, answer lost %v", i+1, a, w.try, w.status, w.lost)
		}
	}
	if refused := ch.Attempts[0]; refused.Error != "" {
		t.Fatalf("refused attempt carries error %q: a refusal is an answer, not a lost one", refused.Error)
	}
}

// TestLostAnswersInAStormAreExactlyThatMany: however the copies of a
// configured storm (without late retries) race, exactly PSP_LOST_ANSWERS
// attempts lose their answer, each is retried, and every copy ends
// acknowledged.
func TestLostAnswersInAStormAreExactlyThatMany(t *testing.T) {
	cfg := config()
	cfg.Mode, cfg.StormCopies, cfg.Replays, cfg.LostAnswers = pspsim.ModeStorm, 20, 0, 3
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, cfg)
	ch := charge(t, sim, c, m, nil)

	// Lost attempts are counted, not the copies that lost one: on a loaded
	// machine a lost copy's quick retry can lose a second answer.
	tl := ch.Tally()
	if tl.Lost != 3 || tl.Retries != tl.Lost || tl.Copies != 20 || tl.AcknowledgedCopies != 20 || tl.Attempts != tl.Copies+tl.Lost {
		t.Fatalf("tally %+v: want 3 answers lost, one retry each, 20 copies all acknowledged, attempts = copies + lost", tl)
	}
}

func TestTally(t *testing.T) {
	c := pspsim.Charge{Deliveries: pspsim.Deliveries{Attempts: []pspsim.Attempt{
		{Copy: 0, Try: 1, Status: http.StatusOK, AnswerLost: true},
		{Copy: 0, Try: 2, Status: http.StatusOK},
		{Copy: 1, Try: 1, Status: http.StatusServiceUnavailable},
		{Copy: 1, Try: 2, Status: http.StatusOK},
		{Copy: 2, Try: 1, Error: "timeout"},
		{Copy: 2, Try: 2, Status: http.StatusUnauthorized},
		{Copy: 3, Try: 1, Status: http.StatusNoContent},
	}}}
	want := pspsim.Tally{Attempts: 7, Copies: 4, Retries: 3, Lost: 1, Answered: 6, Refused: 2, AcknowledgedCopies: 3}
	if got := c.Tally(); got != want {
		t.Fatalf("Tally = %+v, want %+v", got, want)
	}
}

func TestReplayAfterSuccess(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, &pspsim.Plan{Mode: pspsim.ModeReplay, Replays: 4})
	if len(m.received()) != 5 || !ch.Acknowledged {
		t.Fatalf("merchant got %d deliveries, want 1 + 4 replays", len(m.received()))
	}
}

func TestMisbehavingModes(t *testing.T) {
	tests := []struct {
		mode  string
		check func(t *testing.T, r received)
	}{
		{pspsim.ModeWrongAmount, func(t *testing.T, r received) {
			if r.verifyErr != nil || r.n.Amount == 4200 {
				t.Fatalf("wrong_amount: verify %v, amount %d; want a valid signature over another amount", r.verifyErr, r.n.Amount)
			}
		}},
		{pspsim.ModeBadSignature, func(t *testing.T, r received) {
			if !errors.Is(r.verifyErr, psp.ErrBadSignature) {
				t.Fatalf("bad_signature: verify %v", r.verifyErr)
			}
		}},
		{pspsim.ModeStaleTimestamp, func(t *testing.T, r received) {
			if !errors.Is(r.verifyErr, psp.ErrStale) {
				t.Fatalf("stale_timestamp: verify %v", r.verifyErr)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			m := newMerchant(t, func(_ int, r received) int {
				if r.verifyErr != nil {
					return http.StatusUnauthorized
				}
				return http.StatusOK
			})
			sim, c := startSim(t, config())
			charge(t, sim, c, m, &pspsim.Plan{Mode: tt.mode})
			got := m.received()
			if len(got) == 0 {
				t.Fatal("no delivery")
			}
			for _, r := range got {
				tt.check(t, r)
			}
		})
	}
}

func TestOutOfOrderNotifiesBeforeTheChargeAnswerAndRedeliversAnOlderCopy(t *testing.T) {
	var charged atomic.Bool
	var before atomic.Int32
	m := newMerchant(t, func(int, received) int {
		if !charged.Load() {
			before.Add(1)
		}
		return http.StatusOK
	})
	sim, c := startSim(t, config())
	ctx := context.Background()
	if status := c.plan(t, "P1", pspsim.Plan{Mode: pspsim.ModeOutOfOrder}); status != http.StatusCreated {
		t.Fatalf("POST /sim/plans: %d", status)
	}
	resp, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P1", Amount: 4200, NotifyURL: m.srv.URL})
	charged.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	got := m.received()
	if before.Load() != 1 || len(got) != 2 {
		t.Fatalf("%d deliveries before the charge answer, %d in all; want 1 and 2", before.Load(), len(got))
	}
	ch, _ := sim.Get(resp.PlatformSerial)
	if !ch.Acknowledged || got[1].verifyErr != nil {
		t.Fatalf("late copy: %+v, verify %v", ch, got[1].verifyErr)
	}
	// The late copy is older, not merely later: its signature timestamp
	// (whole seconds) is below the first delivery's, so a handler that
	// orders notifications by timestamp sees it out of order.
	if got[1].timestamp >= got[0].timestamp {
		t.Fatalf("late copy signed at %d, first delivery at %d: want the late copy's %s below the first's",
			got[1].timestamp, got[0].timestamp, psp.HeaderTimestamp)
	}
}

func TestChargesAreKeyedByOutTradeNo(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ctx := context.Background()
	a, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P1", Amount: 4200, NotifyURL: m.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P1", Amount: 4200, NotifyURL: m.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, sim)
	if a.PlatformSerial != b.PlatformSerial || len(m.received()) != 1 {
		t.Fatalf("charging twice gave serials %s and %s and %d notifications; want one transaction", a.PlatformSerial, b.PlatformSerial, len(m.received()))
	}
}

// TestAPlanIsForOneCharge: a plan applies to the charge of the out_trade_no
// it was filed for, once; other payments, and the same payment's charge
// answered from the first transaction, are delivered as configured. A plan
// filed in process (SetPlan, what the lab does) is the same plan.
func TestAPlanIsForOneCharge(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ctx := context.Background()
	testMust(t, sim.SetPlan("P-storm", pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 3}))
	if err := sim.SetPlan("P-bad", pspsim.Plan{Mode: "chaos"}); err == nil {
		t.Fatal("SetPlan accepted an unknown mode")
	}
	serials := map[string]string{}
	for _, no := range []string{"P-other", "P-storm", "P-storm"} {
		resp, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: no, Amount: 4200, NotifyURL: m.srv.URL})
		testMust(t, err)
		serials[no] = resp.PlatformSerial
		wait(t, sim)
	}
	other, _ := sim.Get(serials["P-other"])
	stormed, _ := sim.Get(serials["P-storm"])
	if other.Plan.Mode != pspsim.ModeNormal || len(other.Attempts) != 1 {
		t.Fatalf("P-other: plan %+v, %d attempts; want the configured normal delivery", other.Plan, len(other.Attempts))
	}
	if stormed.Plan.Mode != pspsim.ModeStorm || len(stormed.Attempts) != 3 {
		t.Fatalf("P-storm: plan %+v, %d attempts; want the filed storm of 3", stormed.Plan, len(stormed.Attempts))
	}
	if got := len(m.received()); got != 1+3 {
		t.Fatalf("merchant got %d deliveries, want 4: charging P-storm again starts nothing", got)
	}
}

func testMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCallbackListSpreadsDeliveries configures two receivers, as two
// replicas of the payment service: one that always fails, one that
// answers 200. Deliveries go to each in turn, so a notification the
// failing replica refused is retried on the other and acknowledged, and
// every charge's attempts reach both.
func TestCallbackListSpreadsDeliveries(t *testing.T) {
	down := newMerchant(t, func(int, received) int { return http.StatusServiceUnavailable })
	up := newMerchant(t, func(int, received) int { return http.StatusOK })
	cfg := config()
	cfg.CallbackURL = down.srv.URL + "," + up.srv.URL
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a comma-separated PSP_CALLBACK_URL is refused: %v", err)
	}
	sim, c := startSim(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	const charges = 10
	var serials []string
	for i := range charges {
		resp, err := c.Charge(ctx, psp.ChargeRequest{OutTradeNo: "P" + strconv.Itoa(i), Amount: 100})
		if err != nil {
			t.Fatal(err)
		}
		serials = append(serials, resp.PlatformSerial)
	}
	wait(t, sim)
	for _, s := range serials {
		if ch, _ := sim.Get(s); !ch.Acknowledged {
			t.Fatalf("charge %s not acknowledged: %+v", s, ch.Attempts)
		}
	}
	if len(up.received()) != charges || len(down.received()) == 0 {
		t.Fatalf("answering receiver got %d deliveries (want %d), failing one %d (want some)", len(up.received()), charges, len(down.received()))
	}

	cfg.CallbackURL = up.srv.URL + ",payment:8083/payments/callback"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "PSP_CALLBACK_URL") {
		t.Fatalf("a list with a relative URL: %v, want an error naming PSP_CALLBACK_URL", err)
	}
}
