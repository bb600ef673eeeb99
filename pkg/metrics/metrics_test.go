package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
)

func TestRegisterReusesTheRegisteredCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "things_total", Help: "Things."})
	}
	first, err := metrics.Register(reg, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	second, err := metrics.Register(reg, newCounter())
	if err != nil {
		t.Fatalf("second registration: %v, want the first collector back", err)
	}
	second.Inc()
	if first != second {
		t.Fatal("the second registration returned a new collector; its increments would be lost")
	}
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "things_total", Help: "Other things."})
	if _, err := metrics.Register(reg, clash); err == nil {
		t.Fatal("a gauge under a counter's name was accepted")
	}
	if c, err := metrics.Register(nil, newCounter()); err != nil || c == nil {
		t.Fatalf("nil registry: %v, %v; want the collector back unregistered", c, err)
	}
}

// TestSetDeclaresAndKeepsTheFirstError: a Set's collectors are registered
// (a second Set on the same registry gets the same ones back), Zero's
// series read 0 at once, and a clash is Err's, named, while the rest are
// still declared.
func TestSetDeclaresAndKeepsTheFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := metrics.NewSet(reg)
	c := s.Counters("calls_total", "Calls by outcome.", "outcome")
	metrics.Zero(c.WithLabelValues, "ok", "failed")
	s.Gauge("depth", "Depth.")
	if again := metrics.NewSet(reg).Counters("calls_total", "Calls by outcome.", "outcome"); again != c || s.Err() != nil {
		t.Fatalf("a second declaration: same collector %v, err %v", again == c, s.Err())
	}
	s.Gauges("calls_total", "Calls by outcome.", "outcome")
	h := s.Histogram("wait_seconds", "Waits.", prometheus.DefBuckets)
	h.Observe(1)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	if s.Err() == nil || !strings.Contains(s.Err().Error(), "calls_total") || series["calls_total"] != 2 || series["wait_seconds"] != 1 || series["depth"] != 1 {
		t.Fatalf("err %v, series %v; want the clash named and calls_total{ok,failed}, depth, wait_seconds", s.Err(), series)
	}
}
