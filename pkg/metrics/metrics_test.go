package metrics_test

import (
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
