package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric sums the samples of the counter or gauge name in g whose labels
// include every pair of match (label, value, label, value …); 0 when none
// does.
func Metric(t testing.TB, g prometheus.Gatherer, name string, match ...string) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range samples(t, g, name) {
		if hasLabels(m, match) {
			sum += value(m)
		}
	}
	return sum
}

// MetricBy returns the samples of the counter or gauge name in g by the
// value of their label.
func MetricBy(t testing.TB, g prometheus.Gatherer, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range samples(t, g, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += value(m)
			}
		}
	}
	return out
}

func samples(t testing.TB, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func hasLabels(m *dto.Metric, match []string) bool {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(match); i += 2 {
		if labels[match[i]] != match[i+1] {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}
