package main

import (
	"time"
)

// PhaseReport is one phase's figures. Requests count by when they were
// sent (those sent after the load, by purchases still finishing, count in
// the last phase); the flow counts the purchases started in the phase;
// goodput counts the purchases that completed during it, whenever they
// started.
type PhaseReport struct {
	Phase   string  `json:"phase"` // as --phases spells it
	Rate    float64 `json:"rate,omitempty"`
	Seconds float64 `json:"duration_s"`
	Fault   string  `json:"fault,omitempty"`

	Started   int       `json:"purchases_started"`
	Completed int       `json:"completed"`
	Goodput   float64   `json:"goodput_per_s"`
	Flow      PhaseFlow `json:"flow"`

	// Admitted is the latency of the customers' tries that got an answer
	// kept (2xx, 4xx); Refused that of the 503 and 429 answers; Failed
	// counts the tries that got no answer (timeout, connection) or another
	// answer a client retries (500, 502, 504, 409 in progress).
	Admitted Percentiles `json:"admitted"`
	Refused  Percentiles `json:"refused"`
	Failed   int         `json:"failed_tries"`
	// Answers counts the customers' tries by what they got: a status, or
	// timeout, connection.
	Answers map[string]int `json:"answers"`

	MaxRSSMiB map[string]float64    `json:"max_rss_mib"`
	Ready     map[string]ReadyCount `json:"readyz"`
	Cost      *Cost                 `json:"cost,omitempty"`

	// RecoveredAfter is how long after the phase began the latencies were
	// back to normal (see recovery), against the first phase; nil when they
	// were not within the phase. It is judged for a phase that follows a
	// higher rate or an outage; Recovery says what was judged, or why not,
	// and is empty for the other phases.
	RecoveredAfter *float64 `json:"recovered_after_s,omitempty"`
	Recovery       string   `json:"recovery,omitempty"`
}

// PhaseFlow is the flow of the purchases started in one phase.
type PhaseFlow struct {
	Orders                   int         `json:"orders"`
	Paid                     int         `json:"paid"`
	CreatedToPaymentRecorded Percentiles `json:"created_to_payment_recorded"`
	CreatedToOrderPaid       Percentiles `json:"created_to_order_paid"`
	CreatedToCouponUsed      Percentiles `json:"created_to_coupon_used"`
}

// Recovery's definition: 1 s windows, normal when each p99 is within this
// factor of the first phase's, two normal windows in a row.
const (
	recoveryWindow = time.Second
	recoveryFactor = 1.5
)

// timed is a latency and the moment it is attributed to.
type timed struct {
	at time.Time
	d  time.Duration
}

// recovery returns how long after from the latencies were back to normal:
// the start of the first of two consecutive recoveryWindow windows, both
// within [from, to), in each of which the p99 of the admitted requests and
// the p99 of created → PAID (orders created in the window) are within
// recoveryFactor × refReq and × refPaid. A window with no admitted request
// or no paid order is not normal. ok is false when no two such windows
// came.
func recovery(req, paid []timed, from, to time.Time, refReq, refPaid time.Duration) (after time.Duration, ok bool) {
	n := int(to.Sub(from) / recoveryWindow)
	if n < 2 {
		return 0, false
	}
	reqW, paidW := make([][]time.Duration, n), make([][]time.Duration, n)
	bucket := func(xs []timed, into [][]time.Duration) {
		for _, x := range xs {
			if i := int(x.at.Sub(from) / recoveryWindow); x.at.Sub(from) >= 0 && i < n {
				into[i] = append(into[i], x.d)
			}
		}
	}
	bucket(req, reqW)
	bucket(paid, paidW)
	normal := func(i int) bool {
		if len(reqW[i]) == 0 || len(paidW[i]) == 0 {
			return false
		}
		return percentiles(reqW[i]).P99 <= recoveryFactor*ms(refReq) && percentiles(paidW[i]).P99 <= recoveryFactor*ms(refPaid)
	}
	for i := 0; i+1 < n; i++ {
		if normal(i) && normal(i+1) {
			return time.Duration(i) * recoveryWindow, true
		}
	}
	return 0, false
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// phaseInput is what the phase reports are computed from.
type phaseInput struct {
	tl       timeline
	began    time.Time
	rows     []orderRow
	userBase uint64
	st       *stats
	w        *watcher
	readings []reading // at each phase's start, and at the load's end
	idle     usage
}

func phaseReports(in phaseInput) []PhaseReport {
	n := len(in.tl.phases)
	at := func(off time.Duration) time.Time { return in.began.Add(off) }

	// The customers' tries, by phase.
	admitted, refused := make([][]time.Duration, n), make([][]time.Duration, n)
	failed := make([]int, n)
	answers := make([]map[string]int, n)
	for k := range answers {
		answers[k] = map[string]int{}
	}
	var reqTimed []timed
	in.st.mu.Lock()
	for _, t := range in.st.tries {
		k := in.tl.at(t.sent.Sub(in.began))
		if !t.customer || k < 0 {
			continue
		}
		answers[k][t.what()]++
		switch t.class {
		case tryAnswered:
			admitted[k] = append(admitted[k], t.took)
			reqTimed = append(reqTimed, timed{t.sent, t.took})
		case tryRefused:
			refused[k] = append(refused[k], t.took)
		default:
			failed[k]++
		}
	}
	startedIn := make([]int, n)
	phaseOf := map[uint64]int{}
	for i, p := range in.st.purchases {
		if p.phase >= 0 && p.phase < n {
			startedIn[p.phase]++
			phaseOf[in.userBase+i] = p.phase
		}
	}
	in.st.mu.Unlock()

	// The orders, by the phase their purchase started in.
	byPhase := make([][]orderRow, n)
	var paidTimed []timed
	for _, r := range in.rows {
		if k, ok := phaseOf[r.user]; ok {
			byPhase[k] = append(byPhase[k], r)
		}
		if r.status == "PAID" {
			paidTimed = append(paidTimed, timed{r.created, r.updated.Sub(r.created)})
		}
	}

	out := make([]PhaseReport, n)
	for k, ph := range in.tl.phases {
		from, to := at(in.tl.starts[k]), at(in.tl.end(k))
		pr := PhaseReport{Phase: ph.String(), Rate: ph.Rate, Seconds: ph.Duration.Seconds(), Fault: ph.Fault, Started: startedIn[k],
			Admitted: percentiles(admitted[k]), Refused: percentiles(refused[k]), Failed: failed[k], Answers: answers[k]}
		for _, r := range in.rows {
			if t, ok := r.done(); ok && !t.Before(from) && t.Before(to) {
				pr.Completed++
			}
		}
		pr.Goodput = float64(pr.Completed) / ph.Duration.Seconds()
		f := flowOf(byPhase[k], from, to)
		pr.Flow = PhaseFlow{Orders: f.Orders, Paid: f.Paid, CreatedToPaymentRecorded: f.CreatedToPaymentRecorded, CreatedToOrderPaid: f.CreatedToOrderPaid, CreatedToCouponUsed: f.CreatedToCouponUsed}
		if in.w != nil {
			pr.MaxRSSMiB, pr.Ready = in.w.of(k)
		}
		if k+1 < len(in.readings) {
			pr.Cost = newCost(between(in.readings[k], in.readings[k+1]), in.idle, pr.Completed, nil)
		}
		out[k] = pr
	}

	// Recovery, against the first phase's p99s.
	if n > 1 {
		ref0, ref1 := at(in.tl.starts[0]), at(in.tl.end(0))
		var refPaid []time.Duration
		for _, p := range paidTimed {
			if !p.at.Before(ref0) && p.at.Before(ref1) {
				refPaid = append(refPaid, p.d)
			}
		}
		refReq := percentiles(admitted[0]).P99
		refPaidP99 := percentiles(refPaid).P99
		for k := 1; k < n; k++ {
			prev := in.tl.phases[k-1]
			if prev.Fault == "" && (prev.Rate <= in.tl.phases[k].Rate || prev.Rate == 0) {
				continue
			}
			if len(admitted[0]) == 0 || len(refPaid) == 0 {
				out[k].Recovery = "no reference: the first phase had no admitted request or no paid order"
				continue
			}
			out[k].Recovery = recoveryRule(refReq, refPaidP99)
			d, ok := recovery(reqTimed, paidTimed, at(in.tl.starts[k]), at(in.tl.end(k)), time.Duration(refReq*float64(time.Millisecond)), time.Duration(refPaidP99*float64(time.Millisecond)))
			if ok {
				s := d.Seconds()
				out[k].RecoveredAfter = &s
			} else {
				out[k].Recovery += "; not back to normal within the phase"
			}
		}
	}
	return out
}

func recoveryRule(refReq, refPaid float64) string {
	return "first of two 1 s windows with the admitted requests' p99 ≤ 1.5 × " + fmtMs(refReq) + " and created → PAID p99 ≤ 1.5 × " + fmtMs(refPaid) + " (the first phase's)"
}

func fmtMs(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(100 * time.Microsecond).String()
}
