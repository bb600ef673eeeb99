package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Phase is one stretch of a run: purchases offered at one rate (or by
// closed-loop workers) for a duration, with an outage in force throughout
// it if Fault is set.
type Phase struct {
	// Rate is the purchases started per second (open loop); 0 runs
	// Config.Concurrency workers back to back instead.
	Rate     float64
	Duration time.Duration
	// Fault is one of the faults below, begun when the phase starts and
	// healed when it ends; empty for none.
	Fault string
}

// The faults a phase can hold (they need the private rig).
const (
	// faultDBCut closes every service's database sessions at the fault
	// proxy and refuses new ones: MySQL is down.
	faultDBCut = "db-cut"
	// faultDBBlackhole does the same but holds new connections unanswered:
	// MySQL's network is gone, clients wait for their own timeouts.
	faultDBBlackhole = "db-blackhole"
	// faultNATSDown stops the rig's NATS server (SIGTERM) and starts it
	// again on the same JetStream store when the phase ends.
	faultNATSDown = "nats-down"
)

var phaseFaults = []string{faultDBCut, faultDBBlackhole, faultNATSDown}

// String is the phase as --phases spells it.
func (p Phase) String() string {
	s := "workers"
	if p.Rate > 0 {
		s = strconv.FormatFloat(p.Rate, 'f', -1, 64) + "/s"
	}
	s += ":" + p.Duration.String()
	if p.Fault != "" {
		s += ":" + p.Fault
	}
	return s
}

// parsePhases reads --phases: comma-separated RATE/s:DURATION[:FAULT]
// ("300/s:60s,75/s:30s", "50/s:5m:db-cut").
func parsePhases(s string) ([]Phase, error) {
	var out []Phase
	for _, part := range strings.Split(s, ",") {
		fields := strings.Split(strings.TrimSpace(part), ":")
		if len(fields) < 2 || len(fields) > 3 {
			return nil, fmt.Errorf("phase %q: want RATE/s:DURATION[:FAULT]", part)
		}
		rate, err := strconv.ParseFloat(strings.TrimSuffix(fields[0], "/s"), 64)
		if err != nil || rate <= 0 {
			return nil, fmt.Errorf("phase %q: the rate must be a number of purchases per second above 0, like 50/s", part)
		}
		d, err := time.ParseDuration(fields[1])
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("phase %q: the duration must be like 60s or 5m", part)
		}
		ph := Phase{Rate: rate, Duration: d}
		if len(fields) == 3 {
			if !slices.Contains(phaseFaults, fields[2]) {
				return nil, fmt.Errorf("phase %q: unknown fault %q (have %s)", part, fields[2], strings.Join(phaseFaults, ", "))
			}
			ph.Fault = fields[2]
		}
		out = append(out, ph)
	}
	if len(out) == 0 {
		return nil, errors.New("no phase")
	}
	return out, nil
}

// timeline places the phases one after the other from the load's start.
type timeline struct {
	phases []Phase
	starts []time.Duration // each phase's start, after the load's
	total  time.Duration
}

func newTimeline(phases []Phase) timeline {
	t := timeline{phases: phases}
	for _, p := range phases {
		t.starts = append(t.starts, t.total)
		t.total += p.Duration
	}
	return t
}

// at returns the phase in force at off after the load's start: -1 before
// the load, the last phase after it (the requests of purchases still
// finishing belong to the phase that started them).
func (t timeline) at(off time.Duration) int {
	if off < 0 {
		return -1
	}
	for i := len(t.starts) - 1; i >= 0; i-- {
		if off >= t.starts[i] {
			return i
		}
	}
	return 0
}

// end returns the end of phase i, after the load's start.
func (t timeline) end(i int) time.Duration { return t.starts[i] + t.phases[i].Duration }

// faults reports whether any phase holds one of the given faults.
func (t timeline) faults(kinds ...string) bool {
	return slices.ContainsFunc(t.phases, func(p Phase) bool { return slices.Contains(kinds, p.Fault) })
}
