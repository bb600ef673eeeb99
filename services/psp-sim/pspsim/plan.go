package pspsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
)

// Delivery modes of the simulator: how it delivers a charge's notification.
const (
	ModeNormal         = "normal"          // one delivery, retried until 2xx
	ModeStorm          = "storm"           // Copies concurrent deliveries of the same notification
	ModeReplay         = "replay"          // Replays more deliveries after the first 2xx
	ModeOutOfOrder     = "out_of_order"    // notify before answering the charge, then an older-signed copy late
	ModeWrongAmount    = "wrong_amount"    // notification amount differs from the charge
	ModeBadSignature   = "bad_signature"   // signed with the wrong secret
	ModeStaleTimestamp = "stale_timestamp" // signed with a timestamp outside any sane window
	// ModeHold holds the notification of a paid charge until
	// POST /sim/charges/{out_trade_no}/deliver (Simulator.Deliver): the
	// customer has paid, the notification is in flight. A close or a query
	// meanwhile answers paid.
	ModeHold = "hold"
	// ModeSilent never notifies the charge, nor its refunds: the platform
	// has gone quiet, and only a query finds out that it was paid.
	ModeSilent = "silent"
	// ModeCloseRace is hold, and a close answers closed although the charge
	// is paid: the race inside a real platform between the merchant's close
	// and the customer's payment. The held notification, delivered later,
	// reports a payment on a charge the merchant believes closed.
	ModeCloseRace = "close_race"
)

// Modes lists every delivery mode.
var Modes = []string{ModeNormal, ModeStorm, ModeReplay, ModeOutOfOrder, ModeWrongAmount, ModeBadSignature, ModeStaleTimestamp,
	ModeHold, ModeSilent, ModeCloseRace}

// holds reports whether a charge delivered by p waits for Deliver.
func (p Plan) holds() bool { return p.Mode == ModeHold || p.Mode == ModeCloseRace }

// Plan says how the simulator delivers one charge's notification. It is the
// simulator's own lab knob, never part of the platform contract (psp): a
// lab or a test files it for an out_trade_no (POST /sim/plans, or SetPlan
// in process) before the merchant charges that payment, and the merchant's
// charge request stays what a real platform receives.
//
// Storm and Replay combine: Copies concurrent deliveries first, then
// Replays late ones. Copies, Replays and LostAnswers apply to a held
// notification when it is delivered, and to the charge's refund
// notifications, which are delivered by the charge's plan too (never held).
type Plan struct {
	Mode string `json:"mode,omitempty"`
	// Copies is the number of concurrent deliveries in storm mode.
	Copies int `json:"copies,omitempty"`
	// Replays is the number of deliveries sent after the first success.
	Replays int `json:"replays,omitempty"`
	// LostAnswers is how many of the charge's first 2xx answers are lost on
	// the way back: the merchant has processed the notification, the
	// platform hears nothing, counts the attempt as failed and retries it on
	// its schedule. Refusals, timeouts and connection errors are failures
	// already and lose nothing. It is the most common reason a real platform
	// delivers a notification the merchant has already processed, and
	// combines with every mode.
	LostAnswers int `json:"lost_answers,omitempty"`
}

// Validate reports a plan the simulator cannot deliver: an unknown mode, or
// counts outside their bounds. An empty Mode is valid: the charge then gets
// the configured mode (see Simulator.SetPlan).
func (p Plan) Validate() error {
	if p.Mode != "" && !slices.Contains(Modes, p.Mode) {
		return fmt.Errorf("unknown mode %q (want one of %v)", p.Mode, Modes)
	}
	if p.Copies < 0 || p.Copies > maxPerCharge || p.Replays < 0 || p.Replays > maxPerCharge || p.LostAnswers < 0 || p.LostAnswers > maxPerCharge {
		return fmt.Errorf("copies must be 0..%[1]d (0: one), replays 0..%[1]d and lost_answers 0..%[1]d", maxPerCharge)
	}
	return nil
}

// PlanRequest is the body of POST /sim/plans: a Plan for the next charge of
// OutTradeNo, or, with NextCharge instead, for the next charge of a trade
// number that has no plan of its own. The second is for a lab that charges
// through the payment service (POST /payments), which makes the
// out_trade_no itself: it files the plan, then pays, with no other charge in
// between.
type PlanRequest struct {
	OutTradeNo string `json:"out_trade_no,omitempty"`
	NextCharge bool   `json:"next_charge,omitempty"`
	Plan
}

// SetPlan files p for the next charge of outTradeNo, replacing any plan
// filed before and not used yet. The charge is then delivered by one rule:
// a plan that names its mode gets exactly what it names and nothing from the
// configuration (a storm of 4 copies is 4 deliveries); a charge without a
// plan, or whose plan names no mode, is delivered as configured (PSP_MODE,
// and PSP_STORM_COPIES, PSP_REPLAYS and PSP_LOST_ANSWERS wherever the plan
// leaves them zero).
func (s *Simulator) SetPlan(outTradeNo string, p Plan) error {
	if outTradeNo == "" {
		return errors.New("a plan needs the out_trade_no of the charge it is for (or next_charge)")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.plans[outTradeNo] = p
	s.mu.Unlock()
	return nil
}

// SetNextPlan files p for the next charge of a trade number without a plan
// of its own; plans filed this way are used in the order they were filed,
// one charge each.
func (s *Simulator) SetNextPlan(p Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.next = append(s.next, p)
	s.mu.Unlock()
	return nil
}

// takePlan returns the plan filed for outTradeNo, else the oldest plan
// filed for the next charge, if any, and forgets it: a plan is for one
// charge. The caller holds s.mu.
func (s *Simulator) takePlan(outTradeNo string) (Plan, bool) {
	if p, ok := s.plans[outTradeNo]; ok {
		delete(s.plans, outTradeNo)
		return p, true
	}
	if len(s.next) > 0 {
		p := s.next[0]
		s.next = s.next[1:]
		return p, true
	}
	return Plan{}, false
}

// handleSetPlan serves POST /sim/plans. It has no authentication: the
// simulator is a lab tool and never faces the internet.
func (s *Simulator) handleSetPlan(w http.ResponseWriter, r *http.Request) {
	var req PlanRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want a JSON plan"})
		return
	}
	var err error
	switch {
	case req.NextCharge && req.OutTradeNo != "":
		err = errors.New("a plan is for out_trade_no or for the next charge, not both")
	case req.NextCharge:
		err = s.SetNextPlan(req.Plan)
	default:
		err = s.SetPlan(req.OutTradeNo, req.Plan)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusCreated, req)
}

// resolve turns a charge's filed plan (if any) into the plan it is
// delivered by, following the rule of SetPlan.
func (s *Simulator) resolve(filed Plan) Plan {
	p := filed
	if p.Mode == "" {
		p.Mode = s.cfg.Mode
		if p.Mode == ModeStorm && p.Copies == 0 {
			p.Copies = s.cfg.StormCopies
		}
		if (p.Mode == ModeStorm || p.Mode == ModeReplay) && p.Replays == 0 {
			p.Replays = s.cfg.Replays
		}
		if p.LostAnswers == 0 {
			p.LostAnswers = s.cfg.LostAnswers
		}
	}
	// Every charge is delivered at least once.
	if p.Copies == 0 {
		p.Copies = 1
	}
	return p
}
