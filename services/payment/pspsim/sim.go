package pspsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncemall/oncemall/services/payment/psp"
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

// Charge is what the simulator knows about one accepted charge.
type Charge struct {
	Notification psp.Notification `json:"notification"`
	NotifyURL    string           `json:"notify_url"`
	// Plan is how the notification is delivered: the plan filed for the
	// charge's out_trade_no, completed from the configuration.
	Plan     Plan      `json:"plan"`
	Attempts []Attempt `json:"attempts"`
	// Acknowledged is true once any delivery got a 2xx answer.
	Acknowledged bool `json:"acknowledged"`
	// Done is true when every delivery of this charge has finished,
	// acknowledged or with its retry schedule exhausted.
	Done bool `json:"done"`

	// answersToLose counts down Plan.LostAnswers.
	answersToLose int
}

// Tally is what a charge's deliveries came to, counted from its attempts.
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

// Tally counts c's attempts. The simulator logs it when a charge is done;
// tests read it from Get or GET /charges/{serial}.
func (c Charge) Tally() Tally {
	copies, acked := map[int]bool{}, map[int]bool{}
	t := Tally{Attempts: len(c.Attempts)}
	for _, a := range c.Attempts {
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

// Simulator accepts charges and delivers their notifications.
type Simulator struct {
	cfg      Config
	secret   []byte
	schedule []time.Duration
	log      *slog.Logger
	client   *http.Client
	now      func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	seq    atomic.Int64

	mu        sync.Mutex
	charges   map[string]*Charge // by platform serial
	byTradeNo map[string]string  // out_trade_no → platform serial
	plans     map[string]Plan    // out_trade_no → plan filed for its next charge
}

// New returns a simulator; Close stops its deliveries.
func New(cfg Config, log *slog.Logger) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	schedule, _ := cfg.Schedule()
	ctx, cancel := context.WithCancel(context.Background())
	return &Simulator{
		cfg:       cfg,
		secret:    []byte(cfg.Secret),
		schedule:  schedule,
		log:       log,
		client:    &http.Client{Timeout: cfg.NotifyTimeout},
		now:       time.Now,
		ctx:       ctx,
		cancel:    cancel,
		charges:   map[string]*Charge{},
		byTradeNo: map[string]string{},
		plans:     map[string]Plan{},
	}, nil
}

// Handler serves the simulator's API:
//
//	POST /charges          accept a psp.ChargeRequest, answer psp.ChargeResponse (201)
//	GET  /charges/{serial} the Charge with its delivery attempts
//	POST /sim/plans        file a PlanRequest: how the next charge of its out_trade_no is delivered (lab only)
//	GET  /healthz          liveness
func (s *Simulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", s.handleCharge)
	mux.HandleFunc("POST /sim/plans", s.handleSetPlan)
	mux.HandleFunc("GET /charges/{serial}", s.handleGetCharge)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

// Close stops retrying and waits for in-flight deliveries to end.
func (s *Simulator) Close() {
	s.cancel()
	s.wg.Wait()
}

// Wait blocks until every delivery started so far has finished or ctx ends.
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

func (s *Simulator) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	c, ok := s.Get(r.PathValue("serial"))
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such charge"})
		return
	}
	writeJSON(w, http.StatusOK, c)
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
	// same payment again returns the first transaction and starts nothing.
	s.mu.Lock()
	if prev, ok := s.byTradeNo[req.OutTradeNo]; ok {
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, psp.ChargeResponse{PlatformSerial: prev, OutTradeNo: req.OutTradeNo, Amount: req.Amount})
		return
	}
	s.byTradeNo[req.OutTradeNo] = serial
	s.mu.Unlock()
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
	c := &Charge{Notification: n, NotifyURL: notifyURL, Plan: plan, answersToLose: plan.LostAnswers}
	s.mu.Lock()
	s.charges[serial] = c
	s.mu.Unlock()
	s.log.Info("charge accepted", "platform_serial", serial, "out_trade_no", req.OutTradeNo, "amount", req.Amount, "mode", plan.Mode)

	body, _ := json.Marshal(n)
	s.wg.Add(1)
	if plan.Mode == ModeOutOfOrder {
		// The notification overtakes the charge answer: the merchant hears
		// "paid" before it learns the platform serial from the charge call.
		// A copy signed before the charge (outOfOrderAge) is held back and
		// delivered after the first success, so the merchant also sees an
		// older notification last.
		early := s.signedAt(now.Add(-outOfOrderAge), plan)
		ok := s.attempt(c, 0, 1, body)
		answered := make(chan struct{})
		defer close(answered)
		go func() {
			defer s.wg.Done()
			if !ok {
				ok = s.deliver(c, 0, body, 1)
			}
			<-answered
			if ok && s.sleep(outOfOrderLag) {
				s.send(c, 1, 1, body, early)
			}
			s.replay(c, body)
			s.finish(c)
		}()
	} else {
		go func() {
			defer s.wg.Done()
			if !s.sleep(s.cfg.NotifyDelay) {
				s.finish(c)
				return
			}
			s.storm(c, body)
			s.replay(c, body)
			s.finish(c)
		}()
	}
	writeJSON(w, http.StatusCreated, psp.ChargeResponse{PlatformSerial: serial, OutTradeNo: req.OutTradeNo, Amount: req.Amount})
}

// storm delivers Plan.Copies copies at once, each with its own retries. All
// copies are released together by one channel close, so they hit the
// merchant as close to simultaneously as the scheduler allows.
func (s *Simulator) storm(c *Charge, body []byte) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < c.Plan.Copies; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s.deliver(c, i, body, 0)
		}()
	}
	close(start)
	wg.Wait()
}

// replay delivers Plan.Replays more copies one after another once the
// notification has been acknowledged: the platform's late retries, or a
// replay after success.
func (s *Simulator) replay(c *Charge, body []byte) {
	if c.Plan.Replays == 0 || !s.acknowledged(c) {
		return
	}
	gap := 10 * time.Millisecond
	if len(s.schedule) > 0 && s.schedule[0] < gap {
		gap = s.schedule[0]
	}
	for i := 0; i < c.Plan.Replays; i++ {
		if !s.sleep(gap) {
			return
		}
		s.deliver(c, c.Plan.Copies+i, body, 0)
	}
}

// deliver sends one copy until it is acknowledged or the retry schedule is
// exhausted; tries already made are skipped. It reports acknowledgement.
func (s *Simulator) deliver(c *Charge, copyNo int, body []byte, triesDone int) bool {
	for try := triesDone + 1; ; try++ {
		if try > 1 {
			if try-2 >= len(s.schedule) {
				s.log.Warn("notification retries exhausted", "platform_serial", c.Notification.PlatformSerial, "copy", copyNo)
				return false
			}
			if !s.sleep(s.schedule[try-2]) {
				return false
			}
		}
		if s.attempt(c, copyNo, try, body) {
			return true
		}
	}
}

// attempt makes one signed delivery, signed now.
func (s *Simulator) attempt(c *Charge, copyNo, try int, body []byte) bool {
	return s.send(c, copyNo, try, body, s.signedAt(s.now(), c.Plan))
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
func (s *Simulator) send(c *Charge, copyNo, try int, body []byte, g signing) bool {
	h := http.Header{}
	psp.SignHeaders(h, g.secret, g.at, body)
	h.Set("Content-Type", "application/json")

	rec := Attempt{Copy: copyNo, Try: try, At: s.now()}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, c.NotifyURL, bytes.NewReader(body))
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
	rec.AnswerLost = got2xx && c.answersToLose > 0
	if rec.AnswerLost {
		c.answersToLose--
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
	c.Attempts = append(c.Attempts, rec)
	if ok {
		c.Acknowledged = true
	}
	s.mu.Unlock()
	s.log.Debug("notification delivered", "platform_serial", c.Notification.PlatformSerial, "copy", copyNo, "try", try, "status", rec.Status, "answer_lost", rec.AnswerLost, "err", rec.Error)
	return ok
}

func (s *Simulator) acknowledged(c *Charge) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.Acknowledged
}

// finish marks c done and logs what its deliveries came to.
func (s *Simulator) finish(c *Charge) {
	s.mu.Lock()
	c.Done = true
	t, acked := c.Tally(), c.Acknowledged
	s.mu.Unlock()
	s.log.Info("charge deliveries done", "platform_serial", c.Notification.PlatformSerial, "mode", c.Plan.Mode,
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
