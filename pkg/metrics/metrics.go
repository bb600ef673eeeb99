// Package metrics is the one way oncemall code registers Prometheus
// collectors: Register adds a collector to a registry, or hands back the one
// already registered under the same description, so that two components of
// one process (two relays in a benchmark, a test that restarts a consumer)
// share their series instead of failing to start.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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
