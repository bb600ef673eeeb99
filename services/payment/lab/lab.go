// Package lab holds incident 2's scenarios (payment callback retries) for
// both front ends: `make lab` prints them and this package's tests assert on
// them. It also exports the Rig the scenarios run on, which the payment
// service's tests and benchmark reuse.
package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// Incident is incident 2's number in DESIGN.md.
const Incident = 2

// The storms of the scenarios: how many payments are stormed, the copies
// the platform sends at once for each, then the late retries after the
// first success.
const (
	Storms      = 3
	StormCopies = 50
	LateRetries = 10
)

// Scenarios lists incident 2's variants: the broken handler must record the
// payment more than once, the fixed one exactly once.
func Scenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: Incident, Variant: lab.Broken, WantHolds: false, Run: storm(variant.Broken)},
		{Incident: Incident, Variant: lab.Fixed, WantHolds: true, Run: storm(variant.Fixed)},
	}
}

// storm runs the platform simulator against the callback handler in mode
// (the lab schema applied, so that the broken handler has its table):
// for each of Storms payments, StormCopies concurrent deliveries of its
// notification, then LateRetries more; it counts payment records, outbox
// rows and stream messages per payment.
//
// Several storms, because the race needs the copies to overlap: on a loaded
// machine one storm in twenty or so reaches the server spread out enough that
// the first copy finishes before the others read, and the broken handler
// looks correct. The fixed handler must hold on every storm.
func storm(m variant.Mode) func(ctx context.Context, env lab.Env) (lab.Result, error) {
	mode := string(m)
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: Incident, Title: "payment callback retries", Variant: mode,
			Injected: fmt.Sprintf("%d payments × (%d concurrent identical callbacks + %d late retries)", Storms, StormCopies, LateRetries),
			Expected: "= 1 record, 1 payment.succeeded row, 1 stream message per payment",
		}
		svc, err := Start(ctx, env, "payment_"+mode, map[string]string{"PAYMENT_CALLBACK_MODE": mode})
		if err != nil {
			return res, err
		}
		defer svc.Close()
		nc, err := natsjs.Connect(ctx, env.NATS, env.Name("payment_"+mode), env.Log)
		if err != nil {
			return res, err
		}
		defer nc.NC.Close()
		stream, err := nc.JS.Stream(ctx, svc.Stream)
		if err != nil {
			return res, err
		}

		// Each storm's callbacks go on a timeline of their own, recorded
		// by a proxy in front of the service; the report shows the storm
		// with the most records.
		var current atomic.Pointer[stormTimeline]
		target, err := url.Parse(svc.URL)
		if err != nil {
			return res, err
		}
		recorder := httptest.NewServer(recordCallbacks(httputil.NewSingleHostReverseProxy(target), &current))
		defer recorder.Close()
		notifyURL := recorder.URL + "/payments/callback"
		sim, simURL, stopSim, err := StartSimulator(env)
		if err != nil {
			return res, err
		}
		defer stopSim()
		charges := psp.NewClient(simURL, http.DefaultClient)

		holds := true
		worst, worstNo := Effects{}, ""
		var worstTimeline *lab.Timeline
		totalEvents := 0
		for i := range Storms {
			st := &stormTimeline{tl: lab.NewTimeline()}
			current.Store(st)
			outTradeNo := fmt.Sprintf("P%s%d", strings.ReplaceAll(env.Name(mode), "_", ""), i)
			if len(outTradeNo) > 60 {
				outTradeNo = outTradeNo[len(outTradeNo)-60:]
			}
			if _, err := svc.InsertPayment(ctx, outTradeNo, 4200); err != nil {
				return res, err
			}
			env.Note("%s: storm %d/%d: the platform sends %d copies at once, then %d late retries", mode, i+1, Storms, StormCopies, LateRetries)
			// The storm is the simulator's plan for this payment; the charge
			// itself is what the service would send.
			err = sim.SetPlan(outTradeNo, pspsim.Plan{Mode: pspsim.ModeStorm, Copies: StormCopies, Replays: LateRetries})
			if err == nil {
				_, err = charges.Charge(ctx, psp.ChargeRequest{OutTradeNo: outTradeNo, Amount: 4200, NotifyURL: notifyURL})
			}
			if err != nil {
				return res, err
			}
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			err = sim.Wait(wctx)
			cancel()
			if err != nil {
				return res, fmt.Errorf("waiting for the platform's deliveries: %w", err)
			}
			eff, err := CountEffects(ctx, svc.DB, outTradeNo)
			if err != nil {
				return res, err
			}
			totalEvents += eff.Events
			holds = holds && eff.Records == 1 && eff.Events == 1 && eff.Status == "PAID"
			if worstNo == "" || eff.Records > worst.Records {
				worst, worstNo = eff, outTradeNo
				worstTimeline = st.tl
				env.Timeline.SetCaption(fmt.Sprintf("storm %d of %d (payment %s, %d record(s)): deliveries numbered as they arrived, %d at once then %d late",
					i+1, Storms, outTradeNo, eff.Records, StormCopies, LateRetries))
			}
		}
		current.Store(nil)
		for _, e := range worstTimeline.Events() {
			env.Timeline.Add(e)
		}
		env.Timeline.MarkDuplicates(1)

		// The relay publishes every committed row; wait until the stream
		// holds as many messages as there are rows, or a little longer.
		var msgs uint64
		deadline := time.Now().Add(10 * time.Second)
		for {
			info, err := stream.Info(ctx)
			if err != nil {
				return res, err
			}
			msgs = info.State.Msgs
			if msgs >= uint64(totalEvents) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		res.Effect = fmt.Sprintf("max payment records per payment (%s: events %d; stream msgs %d for %d payments)",
			worstNo, worst.Events, msgs, Storms)
		res.Count = worst.Records
		res.Holds = holds && msgs == uint64(Storms)
		return res, nil
	}
}

// StartSimulator runs the platform simulator in-process on a loopback
// listener, with the rig's secret and a compressed retry schedule, and
// returns it with its base URL and a stop function.
func StartSimulator(env lab.Env) (*pspsim.Simulator, string, func(), error) {
	sim, err := pspsim.New(SimulatorConfig(), env.Log)
	if err != nil {
		return nil, "", nil, err
	}
	srv := httptest.NewServer(sim.Handler())
	return sim, srv.URL, func() { sim.Close(); srv.Close() }, nil
}

// SimulatorConfig is the simulator configuration of the scenarios and tests:
// the defaults with a retry schedule short enough for a test run.
func SimulatorConfig() pspsim.Config {
	return pspsim.Config{
		Log:               logging.Config{Level: "info"},
		HTTPAddr:          ":8090", // unused: tests serve Handler on their own listener
		Secret:            DevSecret,
		CallbackURL:       "http://127.0.0.1:8083/payments/callback",
		RefundCallbackURL: "http://127.0.0.1:8083/payments/refunds/callback",
		RetrySchedule:     []string{"20ms", "50ms", "100ms"},
		NotifyTimeout:     5 * time.Second,
		NotifyDelay:       0,
		Mode:              pspsim.ModeNormal,
		StormCopies:       StormCopies,
		Replays:           LateRetries,
	}
}

// stormTimeline is the timeline of one storm and the number of callbacks
// it has seen.
type stormTimeline struct {
	tl *lab.Timeline
	n  atomic.Int32
}

// recordCallbacks wraps the rig's handler: every payment callback goes on
// the current storm's timeline as "delivery NN" (in order of arrival), with
// the outcome the handler answered.
func recordCallbacks(h http.Handler, current *atomic.Pointer[stormTimeline]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := current.Load()
		if st == nil || r.URL.Path != "/payments/callback" {
			h.ServeHTTP(w, r)
			return
		}
		actor := fmt.Sprintf("delivery %02d", st.n.Add(1))
		start := time.Now()
		rec := &answerRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		var answer struct {
			Outcome string `json:"outcome"`
		}
		_ = json.Unmarshal(rec.body.Bytes(), &answer)
		kind, label := lab.KindError, fmt.Sprintf("HTTP %d", rec.status)
		switch {
		case rec.status/100 == 2 && answer.Outcome == "processed":
			kind, label = lab.KindEffect, "processed: payment recorded"
		case rec.status/100 == 2 && answer.Outcome == "duplicate":
			kind, label = lab.KindAbsorbed, "duplicate: nothing done"
		case rec.status/100 == 2:
			kind, label = lab.KindStep, answer.Outcome
		}
		st.tl.Span(actor, kind, label, start)
	})
}

// answerRecorder passes a response through and keeps its status and body.
type answerRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) WriteHeader(code int) {
	a.status = code
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.body.Len() < 4096 {
		a.body.Write(b)
	}
	return a.ResponseWriter.Write(b)
}
