package main

import (
	"encoding/json"
	"fmt"
)

// loadReport is what the e2e suite reads of the load generator's --json
// report (scripts/loadgen, Report): the figures its targets are
// judged on, nothing else. testdata/loadgen-*.json are real reports, read
// by the tests of both programs.
type loadReport struct {
	Tag         string  `json:"tag"`
	Replicas    int     `json:"replicas"`
	Duration    float64 `json:"duration_s"`
	Purchases   int     `json:"purchases_started"`
	RetryPolicy string  `json:"retry_policy"`
	ProxyInPath string  `json:"fault_proxy_in_path_of"`
	Flow        struct {
		CreatedToOrderPaid  pct     `json:"created_to_order_paid"`
		CreatedToCouponUsed pct     `json:"created_to_coupon_used"`
		Completed           int     `json:"completed"`
		CompletedInWindow   int     `json:"completed_in_window"`
		PerSecond           float64 `json:"completed_per_second"`
	} `json:"flow"`
	Invariants []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Found string `json:"found"`
	} `json:"invariants"`
	InvariantsHold bool        `json:"invariants_hold"`
	Cost           *loadCost   `json:"cost"`
	Phases         []loadPhase `json:"phases"`
}

// pct is a Percentiles of the load generator, in milliseconds.
type pct struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
}

type loadCost struct {
	Seconds          float64 `json:"window_s"`
	IdleSeconds      float64 `json:"idle_window_s"`
	Completed        int     `json:"completed"`
	CPUs             int     `json:"cpus"`
	BusyPct          float64 `json:"machine_busy_pct"`
	IdleBusyPct      float64 `json:"machine_busy_pct_idle"`
	CPUMsPerPurchase float64 `json:"cpu_ms_per_purchase"`
	CPU              []struct {
		Group         string  `json:"group"`
		Cores         float64 `json:"cores"`
		MsPerPurchase float64 `json:"ms_per_purchase"`
		Counted       bool    `json:"counted"`
	} `json:"cpu"`
	Work []struct {
		Key         string  `json:"key"`
		What        string  `json:"what"`
		PerPurchase float64 `json:"per_purchase"`
	} `json:"work"`
	Unread map[string]string `json:"unread"`
}

type loadPhase struct {
	Phase     string  `json:"phase"`
	Rate      float64 `json:"rate"`
	Seconds   float64 `json:"duration_s"`
	Fault     string  `json:"fault"`
	Started   int     `json:"purchases_started"`
	Completed int     `json:"completed"`
	Goodput   float64 `json:"goodput_per_s"`
	Flow      struct {
		CreatedToOrderPaid  pct `json:"created_to_order_paid"`
		CreatedToCouponUsed pct `json:"created_to_coupon_used"`
	} `json:"flow"`
	Admitted  pct                `json:"admitted"`
	Refused   pct                `json:"refused"`
	Failed    int                `json:"failed_tries"`
	Answers   map[string]int     `json:"answers"`
	MaxRSSMiB map[string]float64 `json:"max_rss_mib"`
	Ready     map[string]struct {
		Polls    int `json:"polls"`
		NotReady int `json:"not_ready"`
	} `json:"readyz"`
	RecoveredAfter *float64 `json:"recovered_after_s"`
	Recovery       string   `json:"recovery"`
}

func parseLoadReport(b []byte) (*loadReport, error) {
	var r loadReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("the load generator's report: %w", err)
	}
	if r.Tag == "" || len(r.Phases) == 0 {
		return nil, fmt.Errorf("the load generator's report has no run in it: %.200s", b)
	}
	return &r, nil
}

// work returns the per-purchase figure of a cost row.
func (c *loadCost) work(key string) (float64, bool) {
	if c == nil {
		return 0, false
	}
	for _, w := range c.Work {
		if w.Key == key {
			return w.PerPurchase, true
		}
	}
	return 0, false
}

// invariant reports whether the named invariant held, and whether it was
// judged at all.
func (r *loadReport) invariant(name string) (ok, judged bool) {
	for _, c := range r.Invariants {
		if c.Name == name {
			return c.OK, true
		}
	}
	return false, false
}

// broken names the invariants that broke.
func (r *loadReport) broken() []string {
	var out []string
	for _, c := range r.Invariants {
		if !c.OK {
			out = append(out, c.Name+" ("+c.Found+")")
		}
	}
	return out
}

// triesShare returns the share of a phase's customer tries that got one of
// answers, and how many tries there were.
func (p loadPhase) triesShare(answers ...string) (share float64, tries int) {
	got := 0
	for a, n := range p.Answers {
		tries += n
		for _, want := range answers {
			if a == want {
				got += n
			}
		}
	}
	if tries == 0 {
		return 0, 0
	}
	return float64(got) / float64(tries), tries
}

// notReady returns the share of a phase's /readyz polls, over every
// service, that found a replica not ready.
func (p loadPhase) notReady() (share float64, polls int) {
	n := 0
	for _, c := range p.Ready {
		polls += c.Polls
		n += c.NotReady
	}
	if polls == 0 {
		return 0, 0
	}
	return float64(n) / float64(polls), polls
}

// maxServiceRSS returns the largest RSS of any service process (order,
// coupon, payment) over the phases.
func (r *loadReport) maxServiceRSS() (mib float64, service string, ok bool) {
	for _, p := range r.Phases {
		for _, s := range []string{"order", "coupon", "payment"} {
			if v, found := p.MaxRSSMiB[s]; found {
				ok = true
				if v > mib {
					mib, service = v, s
				}
			}
		}
	}
	return mib, service, ok
}
