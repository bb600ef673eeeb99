package pspsim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// staleBy is how far in the past a stale_timestamp notification is signed:
// far outside any sane acceptance window.
const staleBy = time.Hour

// outOfOrderLag is how long after the charge answer the held-back, older
// copy of an out_of_order notification is delivered.
const outOfOrderLag = 50 * time.Millisecond

// outOfOrderAge is how much earlier than the charge the held-back copy of an
// out_of_order notification is signed, as if it had sat in a queue that
// long. The signature timestamp has second resolution, so a copy signed at
// charge time would usually carry the same timestamp as the first delivery
// and arrive "late" without being older; two seconds keep it at least one
// timestamp step below every later delivery, and well inside any acceptance
// window.
const outOfOrderAge = 2 * time.Second

// maxPerCharge bounds a charge's copies, replays and lost answers, whether
// the charge names them or they come from the configuration
// (PSP_STORM_COPIES, PSP_REPLAYS, PSP_LOST_ANSWERS, checked by
// Config.Validate), so a configuration the charges could not use is refused
// at start-up.
const maxPerCharge = 1000

// Attempt is one delivery of a notification.
type Attempt struct {
	Copy   int       `json:"copy"` // which concurrent copy or replay (0 for the main delivery)
	Try    int       `json:"try"`  // 1 for the first delivery of this copy, 2 for its first retry, ...
	At     time.Time `json:"at"`
	Status int       `json:"status,omitempty"` // merchant's HTTP status; 0 when no answer
	Error  string    `json:"error,omitempty"`
	// AnswerLost marks an attempt whose 2xx answer the platform did not get
	// (Plan.LostAnswers): Status is the merchant's 2xx, so the
	// merchant processed the notification, but the attempt counts as
	// failed and is retried.
	AnswerLost bool `json:"answer_lost,omitempty"`
}

// Deliveries is how one notification (a charge's "paid", a refund's
// "refunded") was delivered: where to, by which plan, and every attempt.
type Deliveries struct {
	NotifyURL string `json:"notify_url"`
	// Plan is how the notification is delivered: the plan filed for the
	// charge's out_trade_no, completed from the configuration. A refund is
	// delivered by its charge's plan.
	Plan     Plan      `json:"plan"`
	Attempts []Attempt `json:"attempts"`
	// Acknowledged is true once any delivery got a 2xx answer.
	Acknowledged bool `json:"acknowledged"`
	// Done is true when every delivery has finished, acknowledged or with
	// its retry schedule exhausted.
	Done bool `json:"done"`

	// answersToLose counts down Plan.LostAnswers.
	answersToLose int
	// what and id name the notification in the simulator's logs.
	what, id string
	// trace holds the trace headers of the request that made the charge or
	// refund: its deliveries are spans of that trace (nil: untraced).
	trace map[string]string
}

// Charge is what the simulator knows about one accepted charge.
type Charge struct {
	Notification psp.Notification `json:"notification"`
	// Amount is what the merchant charged (the notification says one cent
	// more in wrong_amount mode).
	Amount int64 `json:"amount"`
	// Status is the charge's status at the platform: PAID from the moment it
	// is accepted, because the simulated customer pays at once.
	Status string `json:"status"`
	// Held is true while the notification waits for
	// POST /sim/charges/{out_trade_no}/deliver (modes hold and close_race).
	Held bool `json:"held"`
	// Refunded is the amount given back so far.
	Refunded int64 `json:"refunded"`
	Deliveries
}

// Refund is what the simulator knows about one refund.
type Refund struct {
	Notification psp.RefundNotification `json:"notification"`
	// Requests counts the refund requests that named this refund_no: the
	// first made the refund, every later one got it back.
	Requests int `json:"requests"`
	Deliveries
}

// Tally is what a notification's deliveries came to, counted from its attempts.
type Tally struct {
	Attempts int // deliveries made, retries included
	Copies   int // distinct copies delivered: the concurrent ones, then late retries
	Retries  int // attempts after a copy's first (Try > 1)
	Lost     int // attempts whose 2xx answer the platform lost (AnswerLost)
	Answered int // attempts the merchant answered, with any status
	Refused  int // attempts the merchant answered with a non-2xx status
	// AcknowledgedCopies counts the copies that got a 2xx answer the
	// platform received.
	AcknowledgedCopies int
}

// Tally counts d's attempts. The simulator logs it when a notification is
// done; tests read it from Get or GET /charges/{serial}.
func (d Deliveries) Tally() Tally {
	copies, acked := map[int]bool{}, map[int]bool{}
	t := Tally{Attempts: len(d.Attempts)}
	for _, a := range d.Attempts {
		copies[a.Copy] = true
		if a.Try > 1 {
			t.Retries++
		}
		if a.AnswerLost {
			t.Lost++
		}
		if a.Status != 0 {
			t.Answered++
			if a.Status/100 != 2 {
				t.Refused++
			}
		}
		if a.Status/100 == 2 && !a.AnswerLost {
			acked[a.Copy] = true
		}
	}
	t.Copies, t.AcknowledgedCopies = len(copies), len(acked)
	return t
}

// Simulator accepts charges, closes, queries and refunds, and delivers their
// notifications.
type Simulator struct {
	cfg      Config
	secret   []byte
	schedule []time.Duration
	log      *slog.Logger
	client   *http.Client
	now      func() time.Time
	tracer   trace.Tracer // nil when the simulator does not trace

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64

	mu        sync.Mutex
	charges   map[string]*Charge // by platform serial
	byTradeNo map[string]string  // out_trade_no → platform serial
	plans     map[string]Plan    // out_trade_no → plan filed for its next charge
	next      []Plan             // plans filed for the next charges of trade numbers without one
	// closed holds the out_trade_nos closed before the platform saw a
	// charge for them: a later charge of one is refused.
	closed  map[string]bool
	refunds map[string]*Refund // by refund_no
}

// New returns a simulator; Close stops its deliveries.
func New(cfg Config, log *slog.Logger) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	schedule, _ := cfg.Schedule()
	ctx, cancel := context.WithCancel(context.Background())
	var tracer trace.Tracer
	if tracing.Enabled(cfg.TracerProvider) {
		tracer = cfg.TracerProvider.Tracer(tracerScope)
	}
	return &Simulator{
		tracer:    tracer,
		cfg:       cfg,
		secret:    []byte(cfg.Secret),
		schedule:  schedule,
		log:       log,
		client:    &http.Client{Timeout: cfg.NotifyTimeout, Transport: notifyTransport()},
		now:       time.Now,
		ctx:       ctx,
		cancel:    cancel,
		charges:   map[string]*Charge{},
		byTradeNo: map[string]string{},
		plans:     map[string]Plan{},
		closed:    map[string]bool{},
		refunds:   map[string]*Refund{},
	}, nil
}

// Handler serves the simulator's API:
//
//	POST /charges                              accept a psp.ChargeRequest, answer psp.ChargeResponse (201); 409 if its out_trade_no was closed
//	GET  /charges?out_trade_no=                the psp.Trade: status and, once paid, the transaction (404 unknown)
//	POST /charges/{out_trade_no}/close         psp.CloseResponse: closed, or paid with the transaction
//	GET  /charges/{serial}                     the Charge with its delivery attempts
//	POST /refunds                              accept a psp.RefundRequest, answer psp.RefundResponse (201; 200 for a repeated refund_no)
//	GET  /refunds/{refund_no}                  the Refund with its delivery attempts
//	POST /sim/plans                            file a PlanRequest: how the next charge of its out_trade_no (or the next charge) is delivered (lab only; PSP_ADMIN_TOKEN)
//	POST /sim/charges/{out_trade_no}/deliver   release a held notification (lab only; PSP_ADMIN_TOKEN)
//	GET  /healthz                              liveness
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	s.route(mux, "POST /charges", s.handleCharge)
	s.route(mux, "GET /charges", s.handleQuery)
	s.route(mux, "POST /charges/{out_trade_no}/close", s.handleClose)
	s.route(mux, "GET /charges/{serial}", s.handleGetCharge)
	s.route(mux, "POST /refunds", s.handleRefund)
	s.route(mux, "GET /refunds/{refund_no}", s.handleGetRefund)
	s.route(mux, "POST /sim/plans", s.admin(s.handleSetPlan))
	s.route(mux, "POST /sim/charges/{out_trade_no}/deliver", s.admin(s.handleDeliver))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// admin guards h, one of the simulator's switches, with the bearer token
// PSP_ADMIN_TOKEN, compared in constant time; an empty token refuses
// every request.
func (s *Simulator) admin(h http.HandlerFunc) http.HandlerFunc {
	want := []byte(s.cfg.AdminToken)
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="psp-sim"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "the simulator's switches need PSP_ADMIN_TOKEN as a bearer token"})
			return
		}
		h(w, r)
	}
}

// Close stops retrying and waits for in-flight deliveries to end.
func (s *Simulator) Close() {
	s.cancel()
	s.wg.Wait()
}

// Wait blocks until every delivery started so far has finished or ctx ends.
// A held notification has not started.
func (s *Simulator) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Get returns a copy of the charge with the given serial.
func (s *Simulator) Get(serial string) (Charge, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.charges[serial]
	if !ok {
		return Charge{}, false
	}
	cp := *c
	cp.Attempts = append([]Attempt(nil), c.Attempts...)
	return cp, true
}

// GetRefund returns a copy of the refund with the given refund_no.
func (s *Simulator) GetRefund(refundNo string) (Refund, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[refundNo]
	if !ok {
		return Refund{}, false
	}
	cp := *r
	cp.Attempts = append([]Attempt(nil), r.Attempts...)
	return cp, true
}

func (s *Simulator) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Get(r.PathValue("serial"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such charge"})
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Simulator) handleGetRefund(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.GetRefund(r.PathValue("refund_no"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such refund"})
		return
	}
	writeJSON(w, http.StatusOK, ref)
}

func (s *Simulator) handleCharge(w http.ResponseWriter, r *http.Request) {
	var req psp.ChargeRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	if err := dec.Decode(&req); err != nil || req.OutTradeNo == "" || req.Amount <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want out_trade_no and a positive amount"})
		return
	}
	notifyURL := req.NotifyURL
	if notifyURL == "" {
		notifyURL = s.cfg.CallbackURL
	}
	now := s.now()
	serial := fmt.Sprintf("T%s%06d", now.UTC().Format("20060102150405"), s.seq.Add(1))
	// Like real platforms, charges are keyed by out_trade_no: charging the
	// same payment again returns the first transaction and starts nothing,
	// and a closed trade number cannot be paid.
	// The trade number, the plan and the charge are recorded in one
	// critical section: a close or a query arriving while the charge is
	// being accepted finds either no charge or the whole of it.
	s.mu.Lock()
	if s.closed[req.OutTradeNo] {
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]string{"error": "out_trade_no is closed"})
		return
	}
	if prev, ok := s.byTradeNo[req.OutTradeNo]; ok {
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, psp.ChargeResponse{PlatformSerial: prev, OutTradeNo: req.OutTradeNo, Amount: req.Amount})
		return
	}
	filed, _ := s.takePlan(req.OutTradeNo)
	plan := s.resolve(filed)
	n := psp.Notification{
		Channel:        psp.Channel,
		PlatformSerial: serial,
		OutTradeNo:     req.OutTradeNo,
		Amount:         req.Amount,
		TradeStatus:    psp.TradeSuccess,
		PaidAt:         now.UTC().Truncate(time.Millisecond),
	}
	if plan.Mode == ModeWrongAmount {
		n.Amount++
	}
	c := &Charge{Notification: n, Amount: req.Amount, Status: psp.StatusPaid, Held: plan.holds(),
		Deliveries: Deliveries{NotifyURL: notifyURL, Plan: plan, answersToLose: plan.LostAnswers, what: "payment", id: serial, trace: s.traceOf(r.Context())}}
	if plan.Mode == ModeSilent {
		c.Done = true // nothing will ever be delivered
	}
	s.byTradeNo[req.OutTradeNo] = serial
	s.charges[serial] = c
	s.mu.Unlock()
	s.log.Info("charge accepted", "platform_serial", serial, "out_trade_no", req.OutTradeNo, "amount", req.Amount, "mode", plan.Mode, "held", c.Held)

	body, _ := json.Marshal(n)
	switch {
	case plan.Mode == ModeSilent || c.Held:
		// Silent: never notified. Held: delivered by Deliver.
	case plan.Mode == ModeOutOfOrder:
		// The notification overtakes the charge answer: the merchant hears
		// "paid" before it learns the platform serial from the charge call.
		// A copy signed before the charge (outOfOrderAge) is held back and
		// delivered after the first success, so the merchant also sees an
		// older notification last.
		s.wg.Add(1)
		d := &c.Deliveries
		early := s.signedAt(now.Add(-outOfOrderAge), plan)
		ok := s.attempt(d, 0, 1, body)
		answered := make(chan struct{})
		defer close(answered)
		go func() {
			defer s.wg.Done()
			if !ok {
				ok = s.deliver(d, 0, body, 1)
			}
			<-answered
			if ok && s.sleep(outOfOrderLag) {
				s.send(d, 1, 1, body, early)
			}
			s.replay(d, body)
			s.finish(d)
		}()
	default:
		s.start(&c.Deliveries, body, s.cfg.NotifyDelay)
	}
	writeJSON(w, http.StatusCreated, psp.ChargeResponse{PlatformSerial: serial, OutTradeNo: req.OutTradeNo, Amount: req.Amount})
}

// start delivers d after delay: its concurrent copies, then its late
// replays.
func (s *Simulator) start(d *Deliveries, body []byte, delay time.Duration) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if !s.sleep(delay) {
			s.finish(d)
			return
		}
		s.storm(d, body)
		s.replay(d, body)
		s.finish(d)
	}()
}

// ErrNotHeld is Deliver's answer for a charge whose notification is not
// held: it was delivered already, is silent, or was never held.
var ErrNotHeld = errors.New("the charge's notification is not held")

// ErrUnknownCharge is the answer for an out_trade_no the simulator has no
// charge for.
var ErrUnknownCharge = errors.New("no such charge")

// Deliver releases the held notification of outTradeNo's charge (modes hold
// and close_race): the customer's payment, in flight until now, reaches the
// merchant, with the plan's copies, replays and lost answers.
func (s *Simulator) Deliver(outTradeNo string) error {
	s.mu.Lock()
	serial, ok := s.byTradeNo[outTradeNo]
	if !ok {
		s.mu.Unlock()
		return ErrUnknownCharge
	}
	c := s.charges[serial]
	if !c.Held {
		s.mu.Unlock()
		return ErrNotHeld
	}
	c.Held = false
	body, _ := json.Marshal(c.Notification)
	s.mu.Unlock()
	s.log.Info("held notification released", "platform_serial", serial, "out_trade_no", outTradeNo)
	s.start(&c.Deliveries, body, 0)
	return nil
}

// handleDeliver serves POST /sim/charges/{out_trade_no}/deliver: 202 when
// the held notification is on its way, 404 for an unknown charge, 409 for
// one whose notification is not held.
func (s *Simulator) handleDeliver(w http.ResponseWriter, r *http.Request) {
	no := r.PathValue("out_trade_no")
	switch err := s.Deliver(no); {
	case err == nil:
		writeJSON(w, http.StatusAccepted, map[string]string{"out_trade_no": no, "delivery": "started"})
	case errors.Is(err, ErrUnknownCharge):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	}
}

// CloseCharge closes outTradeNo's charge as POST /charges/{out_trade_no}/close
// does: a paid charge answers paid with its transaction (in close_race mode:
// closed, although it is paid); an out_trade_no the platform never charged is
// closed for good, so a later charge of it is refused.
func (s *Simulator) CloseCharge(outTradeNo string) psp.CloseResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	serial, ok := s.byTradeNo[outTradeNo]
	if !ok {
		s.closed[outTradeNo] = true
		s.log.Info("trade closed before any charge", "out_trade_no", outTradeNo)
		return psp.CloseResponse{Status: psp.CloseClosed, OutTradeNo: outTradeNo}
	}
	c := s.charges[serial]
	if c.Plan.Mode == ModeCloseRace {
		// The race inside a real platform: the close was accepted while the
		// customer's payment was still completing, and the platform answers
		// from the state it read before the payment landed.
		s.log.Warn("close answered closed although the charge is paid (close_race)", "platform_serial", serial, "out_trade_no", outTradeNo)
		return psp.CloseResponse{Status: psp.CloseClosed, OutTradeNo: outTradeNo}
	}
	t := tradeOf(c)
	return psp.CloseResponse{Status: psp.ClosePaid, OutTradeNo: outTradeNo, Channel: t.Channel,
		PlatformSerial: t.PlatformSerial, Amount: t.Amount, PaidAt: t.PaidAt}
}

func (s *Simulator) handleClose(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.CloseCharge(r.PathValue("out_trade_no")))
}

// Trade answers a query for outTradeNo: its status and, once paid, the
// transaction; false when the platform never heard of it.
func (s *Simulator) Trade(outTradeNo string) (psp.Trade, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	serial, ok := s.byTradeNo[outTradeNo]
	if !ok {
		if s.closed[outTradeNo] {
			return psp.Trade{OutTradeNo: outTradeNo, Status: psp.StatusClosed}, true
		}
		return psp.Trade{}, false
	}
	return tradeOf(s.charges[serial]), true
}

// tradeOf is c as a query shows it: the amount the customer paid (the
// notification's, which wrong_amount mode alters too).
func tradeOf(c *Charge) psp.Trade {
	paidAt := c.Notification.PaidAt
	return psp.Trade{OutTradeNo: c.Notification.OutTradeNo, Status: c.Status, Channel: c.Notification.Channel,
		PlatformSerial: c.Notification.PlatformSerial, Amount: c.Notification.Amount, PaidAt: &paidAt}
}

func (s *Simulator) handleQuery(w http.ResponseWriter, r *http.Request) {
	no := r.URL.Query().Get("out_trade_no")
	if no == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want ?out_trade_no="})
		return
	}
	t, ok := s.Trade(no)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": ErrUnknownCharge.Error()})
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// handleRefund serves POST /refunds. A refund_no is made once: a repeat
// with the same out_trade_no and amount gets the first refund back (200) and
// starts nothing; a repeat naming anything else is refused (409). A new
// refund needs a paid charge with that much left to give back (404 unknown
// charge, 409 otherwise), is made at once (201) and notified by the charge's
// plan: the same copies, replays, lost answers and signing, never held, and
// never at all for a silent charge.
func (s *Simulator) handleRefund(w http.ResponseWriter, r *http.Request) {
	var req psp.RefundRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	if err := dec.Decode(&req); err != nil || req.RefundNo == "" || len(req.RefundNo) > 64 || req.OutTradeNo == "" || req.Amount <= 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want refund_no (at most 64 characters), out_trade_no and a positive amount"})
		return
	}
	notifyURL := req.NotifyURL
	if notifyURL == "" {
		notifyURL = s.cfg.RefundCallbackURL
	}
	s.mu.Lock()
	if prev, ok := s.refunds[req.RefundNo]; ok {
		n := prev.Notification
		if n.OutTradeNo != req.OutTradeNo || n.Amount != req.Amount {
			s.mu.Unlock()
			writeJSON(w, http.StatusConflict, map[string]string{"error": "refund_no already names another refund"})
			return
		}
		prev.Requests++
		s.mu.Unlock()
		s.log.Info("refund requested again: the same refund", "refund_no", req.RefundNo, "refund_serial", n.RefundSerial)
		writeJSON(w, http.StatusOK, refundResponse(n))
		return
	}
	serial, ok := s.byTradeNo[req.OutTradeNo]
	if !ok {
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]string{"error": ErrUnknownCharge.Error()})
		return
	}
	c := s.charges[serial]
	if c.Status != psp.StatusPaid || c.Refunded+req.Amount > c.Amount {
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]string{"error": fmt.Sprintf("charge %s is %s with %d of %d refunded", serial, c.Status, c.Refunded, c.Amount)})
		return
	}
	c.Refunded += req.Amount
	now := s.now()
	n := psp.RefundNotification{
		Channel: psp.Channel, RefundSerial: fmt.Sprintf("RF%s%06d", now.UTC().Format("20060102150405"), s.seq.Add(1)),
		RefundNo: req.RefundNo, OutTradeNo: req.OutTradeNo, Amount: req.Amount,
		RefundStatus: psp.TradeSuccess, RefundedAt: now.UTC().Truncate(time.Millisecond),
	}
	plan := c.Plan
	ref := &Refund{Notification: n, Requests: 1,
		Deliveries: Deliveries{NotifyURL: notifyURL, Plan: plan, answersToLose: plan.LostAnswers, what: "refund", id: n.RefundSerial, trace: s.traceOf(r.Context())}}
	if plan.Mode == ModeSilent {
		ref.Done = true
	}
	s.refunds[req.RefundNo] = ref
	s.mu.Unlock()
	s.log.Info("refund made", "refund_no", req.RefundNo, "refund_serial", n.RefundSerial, "out_trade_no", req.OutTradeNo, "amount", req.Amount, "mode", plan.Mode)
	if plan.Mode != ModeSilent {
		body, _ := json.Marshal(n)
		s.start(&ref.Deliveries, body, s.cfg.NotifyDelay)
	}
	writeJSON(w, http.StatusCreated, refundResponse(n))
}

func refundResponse(n psp.RefundNotification) psp.RefundResponse {
	return psp.RefundResponse{RefundNo: n.RefundNo, RefundSerial: n.RefundSerial, OutTradeNo: n.OutTradeNo, Amount: n.Amount}
}

// storm delivers Plan.Copies copies at once, each with its own retries. All
// copies are released together by one channel close, so they hit the
// merchant as close to simultaneously as the scheduler allows.
func (s *Simulator) storm(d *Deliveries, body []byte) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < d.Plan.Copies; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s.deliver(d, i, body, 0)
		}()
	}
	close(start)
	wg.Wait()
}

// replay delivers Plan.Replays more copies one after another once the
// notification has been acknowledged: the platform's late retries, or a
// replay after success.
func (s *Simulator) replay(d *Deliveries, body []byte) {
	if d.Plan.Replays == 0 || !s.acknowledged(d) {
		return
	}
	gap := 10 * time.Millisecond
	if len(s.schedule) > 0 && s.schedule[0] < gap {
		gap = s.schedule[0]
	}
	for i := 0; i < d.Plan.Replays; i++ {
		if !s.sleep(gap) {
			return
		}
		s.deliver(d, d.Plan.Copies+i, body, 0)
	}
}

// deliver sends one copy until it is acknowledged or the retry schedule is
// exhausted; tries already made are skipped. It reports acknowledgement.
func (s *Simulator) deliver(d *Deliveries, copyNo int, body []byte, triesDone int) bool {
	for try := triesDone + 1; ; try++ {
		if try > 1 {
			if try-2 >= len(s.schedule) {
				s.log.Warn("notification retries exhausted", "notification", d.what, "serial", d.id, "copy", copyNo)
				return false
			}
			if !s.sleep(s.schedule[try-2]) {
				return false
			}
		}
		if s.attempt(d, copyNo, try, body) {
			return true
		}
	}
}

// attempt makes one signed delivery, signed now.
func (s *Simulator) attempt(d *Deliveries, copyNo, try int, body []byte) bool {
	return s.send(d, copyNo, try, body, s.signedAt(s.now(), d.Plan))
}

// signing says how one delivery is signed: with which secret and at which
// moment. Misbehaving modes differ only here.
type signing struct {
	secret []byte
	at     time.Time
}

func (s *Simulator) signedAt(at time.Time, p Plan) signing {
	g := signing{secret: s.secret, at: at}
	switch p.Mode {
	case ModeBadSignature:
		g.secret = append([]byte("not-"), s.secret...)
	case ModeStaleTimestamp:
		g.at = at.Add(-staleBy)
	}
	return g
}

// send posts body signed as g says and records the attempt. It reports
// acknowledgement: a 2xx answer that reached the platform.
func (s *Simulator) send(d *Deliveries, copyNo, try int, body []byte, g signing) bool {
	h := http.Header{}
	psp.SignHeaders(h, g.secret, g.at, body)
	h.Set("Content-Type", "application/json")
	ctx, endSpan := s.startDelivery(d, copyNo, try, h)

	rec := Attempt{Copy: copyNo, Try: try, At: s.now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, receiver(d.NotifyURL, d.id, copyNo+try), bytes.NewReader(body))
	if err == nil {
		req.Header = h
		var resp *http.Response
		resp, err = s.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			rec.Status = resp.StatusCode
		}
	}
	got2xx := err == nil && rec.Status/100 == 2

	// Only a 2xx answer can be lost: it is the one that says the merchant
	// processed the notification, while a refusal, a timeout or a
	// connection error is a failure the platform retries anyway. Deciding
	// under the lock as each answer arrives keeps the count exact however
	// many copies race: the first LostAnswers 2xx answers are lost, and no
	// other.
	s.mu.Lock()
	rec.AnswerLost = got2xx && d.answersToLose > 0
	if rec.AnswerLost {
		d.answersToLose--
	}
	ok := got2xx && !rec.AnswerLost
	switch {
	case err != nil:
		rec.Error = err.Error()
	case rec.AnswerLost:
		// The merchant answered in full, so its work is done; the platform
		// behaves as if the connection had dropped before the answer.
		rec.Error = "answer lost on the way back (lost_answers): counted as unanswered and retried"
	}
	d.Attempts = append(d.Attempts, rec)
	if ok {
		d.Acknowledged = true
	}
	s.mu.Unlock()
	endSpan(rec.Status, rec.AnswerLost, err)
	s.log.Debug("notification delivered", "notification", d.what, "serial", d.id, "copy", copyNo, "try", try, "status", rec.Status, "answer_lost", rec.AnswerLost, "err", rec.Error)
	return ok
}

// receiver returns where one attempt goes: notifyURL, or one of its
// comma-separated receivers (the replicas of the payment service). The
// notification's id spreads the notifications over them, and each retry
// of a copy goes to the next receiver, so a retry reaches another replica
// than the one that failed.
func receiver(notifyURL, id string, attempt int) string {
	if !strings.Contains(notifyURL, ",") {
		return notifyURL
	}
	urls := strings.Split(notifyURL, ",")
	h := fnv.New32a()
	h.Write([]byte(id))
	return strings.TrimSpace(urls[(int(h.Sum32()%1024)+attempt)%len(urls)])
}

func (s *Simulator) acknowledged(d *Deliveries) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return d.Acknowledged
}

// finish marks d done and logs what its deliveries came to.
func (s *Simulator) finish(d *Deliveries) {
	s.mu.Lock()
	d.Done = true
	t, acked := d.Tally(), d.Acknowledged
	s.mu.Unlock()
	s.log.Info("deliveries done", "notification", d.what, "serial", d.id, "mode", d.Plan.Mode,
		"attempts", t.Attempts, "copies", t.Copies, "retries", t.Retries, "answers_lost", t.Lost, "refused", t.Refused,
		"acknowledged_copies", t.AcknowledgedCopies, "acknowledged", acked)
}

// sleep waits d unless the simulator is closing; it reports whether to go on.
func (s *Simulator) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// notifyIdleConns is how many idle connections the notifications keep per
// payment service replica. net/http keeps 2, and a platform notifies many
// payments at once: with 2, most notifications opened a new connection,
// which cost both sides more than the notification itself.
const notifyIdleConns = 64

func notifyTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * notifyIdleConns
	t.MaxIdleConnsPerHost = notifyIdleConns
	return t
}
