package outbox

import (
	"testing"
	"time"
)

func TestBackoffDoublesCapsAndJitters(t *testing.T) {
	r := &Relay{cfg: Config{BaseBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		ceil := w * time.Millisecond
		if got := r.cfg.backoffCeiling(i + 1); got != ceil {
			t.Fatalf("ceiling(%d) = %s, want %s", i+1, got, ceil)
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			d := r.backoff(i + 1)
			if d < ceil/2 || d > ceil {
				t.Fatalf("backoff(%d) = %s outside [%s, %s]", i+1, d, ceil/2, ceil)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("backoff(%d) has no jitter: %d distinct values", i+1, len(seen))
		}
	}
}
