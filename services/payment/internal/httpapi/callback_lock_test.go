package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testenv"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/payment/psp"
)

// TestEntryLockTurnsStormCopiesAwayWithoutBeingNeeded: with the Redis lock in
// front, concurrent copies are answered 503 and retried, and the payment is
// recorded once; with Redis unreachable, the lock steps aside and the
// database alone still records it once.
func TestEntryLockTurnsStormCopiesAwayWithoutBeingNeeded(t *testing.T) {
	t.Run("redis up", func(t *testing.T) {
		rdb, prefix := testenv.Redis(t)
		f := buildFixture(t, paymentlab.RigConfig{Mode: "fixed", Lock: redislock.New(rdb, prefix)})
		no := f.payment()
		c := f.charge(no, 4200, &psp.Simulation{Mode: psp.ModeStorm, Copies: 50})
		busy := 0
		for _, a := range c.Attempts {
			if a.Status == http.StatusServiceUnavailable {
				busy++
			}
		}
		if busy == 0 || !c.Acknowledged {
			t.Fatalf("statuses %v: want some copies turned away with 503 and the notification acknowledged", statuses(c))
		}
		if e := f.effects(no); e.Records != 1 || e.Events != 1 || e.Status != "PAID" {
			t.Fatalf("effects %+v", e)
		}
	})
	t.Run("redis down", func(t *testing.T) {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { dead.Close() })
		f := buildFixture(t, paymentlab.RigConfig{Mode: "fixed", Lock: redislock.New(dead, "x:")})
		no := f.payment()
		c := f.charge(no, 4200, &psp.Simulation{Mode: psp.ModeStorm, Copies: 50})
		for _, a := range c.Attempts {
			if a.Status != http.StatusOK {
				t.Fatalf("statuses %v: with Redis down every copy must still be acknowledged", statuses(c))
			}
		}
		if e := f.effects(no); e.Records != 1 || e.Events != 1 || e.Status != "PAID" {
			t.Fatalf("effects %+v", e)
		}
	})
}
