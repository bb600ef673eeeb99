package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/ratelimit"
	"github.com/oncemall/oncemall/pkg/testkit/race"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// admit lets n callers at once ask l for key and returns how many got in.
func admit(t *testing.T, l *ratelimit.Limiter, key string, n int) int {
	t.Helper()
	admitted, err := race.Run(n, func() (bool, error) { return l.Allow(context.Background(), key) })
	testenv.Must(t, err)
	return admitted
}

func TestConcurrentCallersGetExactlyTheLimit(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l, err := ratelimit.New(rdb, ratelimit.Config{Prefix: prefix, Limit: 5, Window: time.Minute})
	testenv.Must(t, err)
	if got := admit(t, l, "user-1", 200); got != 5 {
		t.Fatalf("admitted %d of 200, want exactly 5", got)
	}
	// Keys are independent.
	if got := admit(t, l, "user-2", 50); got != 5 {
		t.Fatalf("second key admitted %d, want 5", got)
	}
	// Refused calls were not counted: the set holds exactly the admissions.
	if n := rdb.ZCard(context.Background(), prefix+"user-1").Val(); n != 5 {
		t.Fatalf("window holds %d members, want 5", n)
	}
}

func TestWindowSlides(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l, err := ratelimit.New(rdb, ratelimit.Config{Prefix: prefix, Limit: 3, Window: 400 * time.Millisecond})
	testenv.Must(t, err)
	if got := admit(t, l, "k", 10); got != 3 {
		t.Fatalf("first window admitted %d, want 3", got)
	}
	if got := admit(t, l, "k", 10); got != 0 {
		t.Fatalf("full window admitted %d, want 0", got)
	}
	time.Sleep(450 * time.Millisecond)
	if got := admit(t, l, "k", 10); got != 3 {
		t.Fatalf("after the window slid, admitted %d, want 3", got)
	}
	if ttl := rdb.PTTL(context.Background(), prefix+"k").Val(); ttl <= 0 || ttl > 400*time.Millisecond {
		t.Fatalf("key ttl %v, want within the window", ttl)
	}
}
