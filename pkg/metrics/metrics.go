// Package metrics is the one way oncemall code registers Prometheus
// collectors: Register adds a collector to a registry, or hands back the one
// already registered under the same description, so that two components of
// one process (two relays in a benchmark, a test that restarts a consumer)
// share their series instead of failing to start. A Set declares a
// component's collectors in one line each.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Register registers c on reg and returns it, or returns the collector of
// the same type already registered under c's description. A nil reg
// registers nothing and returns c. Any other registration error (the same
// name with other labels or help) is returned.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// RegisterProcess registers on reg the collectors of the Go runtime and of
// the process (go_*, process_*) that every oncemall process serves.
func RegisterProcess(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if _, err := Register(reg, c); err != nil {
			return fmt.Errorf("process metrics: %w", err)
		}
	}
	return nil
}

// Set declares one component's collectors on a registry through Register,
// keeping the first error: a constructor declares each collector in one
// line and checks Err once.
type Set struct {
	reg prometheus.Registerer
	err error
}

// NewSet declares on reg (nil: nowhere).
func NewSet(reg prometheus.Registerer) *Set { return &Set{reg: reg} }

// Err is the first declaration that failed, if any.
func (s *Set) Err() error { return s.err }

// Counter declares a counter.
func (s *Set) Counter(name, help string) prometheus.Counter {
	return declare(s, name, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// Counters declares a counter per combination of labels' values.
func (s *Set) Counters(name, help string, labels ...string) *prometheus.CounterVec {
	return declare(s, name, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge declares a gauge.
func (s *Set) Gauge(name, help string) prometheus.Gauge {
	return declare(s, name, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// Gauges declares a gauge per combination of labels' values.
func (s *Set) Gauges(name, help string, labels ...string) *prometheus.GaugeVec {
	return declare(s, name, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Histogram declares a histogram with buckets.
func (s *Set) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return declare(s, name, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// Histograms declares a histogram with buckets per combination of labels'
// values.
func (s *Set) Histograms(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return declare(s, name, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func declare[C prometheus.Collector](s *Set, name string, c C) C {
	c, err := Register(s.reg, c)
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("metric %s: %w", name, err)
	}
	return c
}

// Zero creates the series of each of values at zero through with (a
// one-label vector's WithLabelValues): a dashboard or an alert then reads 0
// before the first event, not "no data".
func Zero[M any](with func(...string) M, values ...string) {
	for _, v := range values {
		with(v)
	}
}
