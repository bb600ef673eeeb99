package idempotencylab_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/lab/idempotencylab"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestBrokenCheckThenAct shows why the broken guard survives review: one
// retry after another is replayed, one order. Under concurrency (requests
// arriving while the first is still in its handler) every racer runs the
// handler; the fixed guard on the same handler lets exactly one through.
func TestBrokenCheckThenAct(t *testing.T) {
	db := testenv.DB(t, idempotency.Migrations)
	testenv.Must(t, db.Exec(`CREATE TABLE guard_order (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY)`).Error)
	rdb, prefix := testenv.Redis(t)
	cfg := idempotency.DefaultConfig()
	cfg.EntryPrefix = prefix
	mw, err := idempotency.New(db, rdb, cfg, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	var delay time.Duration
	create := func(c *gin.Context) {
		time.Sleep(delay) // the request is still in its handler when the others check
		err := db.WithContext(c.Request.Context()).Transaction(func(tx *gorm.DB) error {
			return tx.Exec(`INSERT INTO guard_order () VALUES ()`).Error
		})
		if err != nil {
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		c.JSON(http.StatusCreated, gin.H{"created": true})
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.POST("/broken/orders", idempotencylab.BrokenCheckThenAct(mw, testenv.Logger(t)), create)
	e.POST("/orders", mw.Handler(), create)
	orders := func() int {
		var n int
		testenv.Must(t, db.Raw(`SELECT COUNT(*) FROM guard_order`).Scan(&n).Error)
		return n
	}
	request := func(path, key string) idempotencytest.Request {
		return idempotencytest.Request{Path: path, Key: key, Body: []byte(`{"sku":"A"}`)}
	}

	rs := idempotencytest.Sequential(e, 3, request("/broken/orders", idempotencytest.NewKey()))
	if n := orders(); n != 1 {
		t.Fatalf("sequential retries through the broken guard: %d orders, want 1", n)
	}
	for i, r := range rs {
		if r.Status != http.StatusCreated || string(r.Body) != string(rs[0].Body) || r.Replayed != (i > 0) {
			t.Fatalf("sequential retry %d: %d replayed=%v %s", i, r.Status, r.Replayed, r.Body)
		}
	}

	delay = 50 * time.Millisecond
	before := orders()
	idempotencytest.Race(e, 20, request("/broken/orders", idempotencytest.NewKey()))
	if n := orders() - before; n < 2 {
		t.Fatalf("20 concurrent requests through the broken guard: %d orders, want the incident (more than 1)", n)
	}

	before = orders()
	rs = idempotencytest.Race(e, 20, request("/orders", idempotencytest.NewKey()))
	if n := orders() - before; n != 1 {
		t.Fatalf("20 concurrent requests through the fixed guard: %d orders, want 1", n)
	}
	idempotencytest.CheckOneEffect(t, rs, http.StatusCreated)
}
