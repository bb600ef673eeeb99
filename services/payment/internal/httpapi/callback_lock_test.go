package httpapi_test

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/paymenttest"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// TestEntryLockTurnsStormCopiesAwayWithoutBeingNeeded: with the Redis lock in
// front, copies that meet it are answered 503 and retried, and the payment is
// recorded once; with Redis unreachable, the lock steps aside and the
// database alone still records it once.
func TestEntryLockTurnsStormCopiesAwayWithoutBeingNeeded(t *testing.T) {
	t.Run("redis up", func(t *testing.T) {
		f := buildFixture(t, paymenttest.Config{Vars: map[string]string{"PAYMENT_CALLBACK_LOCK": "true"}})
		locks := f.svc.Locks
		no := f.payment()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Whether copies of a storm overlap is up to the scheduler, so the
		// lock is held (as by a copy that is slow to finish) until the
		// first copy has been turned away; from then on the storm and its
		// retries meet the lock as it comes and goes.
		held, err := locks.Acquire(ctx, app.CallbackLockName(no), time.Minute)
		testenv.Must(t, err)
		testenv.Must(t, f.sim.SetPlan(no, pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 50}))
		resp, err := f.psp.Charge(ctx, psp.ChargeRequest{OutTradeNo: no, Amount: 4200, NotifyURL: f.callbackURL})
		testenv.Must(t, err)
		testenv.WaitFor(t, 10*time.Second, "a copy turned away by the held lock", func() bool {
			c, _ := f.sim.Get(resp.PlatformSerial)
			return slices.ContainsFunc(c.Attempts, func(a pspsim.Attempt) bool { return a.Status == http.StatusServiceUnavailable })
		})
		testenv.Must(t, held.Release(ctx))
		testenv.Must(t, f.sim.Wait(ctx))
		c, _ := f.sim.Get(resp.PlatformSerial)
		if !c.Acknowledged {
			t.Fatalf("statuses %v: want the notification acknowledged once the lock is free", statuses(c))
		}
		if e := f.effects(no); e.Records != 1 || e.Events != 1 || e.Status != "PAID" {
			t.Fatalf("effects %+v", e)
		}
	})
	t.Run("redis down", func(t *testing.T) {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { dead.Close() })
		f := buildFixture(t, paymenttest.Config{Vars: map[string]string{"PAYMENT_CALLBACK_LOCK": "true"},
			Options: assembly.Options{Locks: assembly.RedisLocks(redislock.New(dead, "x:"))}})
		no := f.payment()
		c := f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 50})
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

// TestEntryLockBusyAnswersAPaidCopyAsDuplicate holds the entry lock itself
// and checks both answers a turned-away copy can get: 200 "duplicate" when
// its transaction already paid the payment (so the platform stops
// retrying), 503 while the payment is still unpaid (nothing changed).
func TestEntryLockBusyAnswersAPaidCopyAsDuplicate(t *testing.T) {
	f := buildFixture(t, paymenttest.Config{Vars: map[string]string{"PAYMENT_CALLBACK_LOCK": "true"}})
	locks := f.svc.Locks
	ctx := context.Background()

	paid := f.payment()
	body, h := signedCallback(t, notification(paid, "T-paid", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusOK {
		t.Fatalf("first notification: %d %s", status, b)
	}
	unpaid := f.payment()

	for _, no := range []string{paid, unpaid} {
		held, err := locks.Acquire(ctx, app.CallbackLockName(no), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = held.Release(context.Background()) })
	}
	before := f.snapshot()

	body, h = signedCallback(t, notification(paid, "T-paid", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusOK || !strings.Contains(string(b), "duplicate") {
		t.Fatalf("copy of the paying notification under a held lock: %d %s, want 200 duplicate", status, b)
	}
	body, h = signedCallback(t, notification(unpaid, "T-unpaid", 4200))
	if status, b := f.post("/payments/callback", body, h); status != http.StatusServiceUnavailable {
		t.Fatalf("notification of an unpaid payment under a held lock: %d %s, want 503", status, b)
	}
	if after := f.snapshot(); !reflect.DeepEqual(before, after) {
		t.Fatalf("tables changed under a held lock:\nbefore %+v\nafter  %+v", before, after)
	}
}
