package outbox_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
)

type gormDB = gorm.DB

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// metricValue returns the value of the unlabelled counter or gauge name.
func metricValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
		}
	}
	return 0
}
