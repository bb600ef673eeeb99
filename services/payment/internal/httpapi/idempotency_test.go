package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
)

// TestCreatePaymentIdempotencyKeySuite runs pkg/idempotency's checks on the
// real POST /payments: 50 racing requests with one key create one payment,
// retries replay, a changed body under the same key is refused, no key is
// refused, and two callers' keys are separate. Every caller and key pays its
// own order, so that the unique order_no does not mask the middleware.
func TestCreatePaymentIdempotencyKeySuite(t *testing.T) {
	// Every order the suite names is its caller's, waiting for payment:
	// Request records the owner of each order number it makes up.
	var owners sync.Map
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/internal/orders/:no", func(c *gin.Context) {
		caller, ok := owners.Load(c.Param("no"))
		if !ok {
			c.Status(http.StatusNotFound)
			return
		}
		c.JSON(http.StatusOK, gin.H{"order_no": c.Param("no"), "user_id": caller, "pay_amount": 1000, "status": "WAIT_PAY"})
	})
	orders := httptest.NewServer(e)
	t.Cleanup(orders.Close)
	f := newFixtureWithPlatform(t, orders.URL)

	idempotencytest.RunSuite(t, idempotencytest.Target{
		Handler: spec.Handler(t, f.proxy()),
		Request: func(key, caller string, variant int) idempotencytest.Request {
			sum := sha256.Sum256([]byte(caller + "/" + key))
			orderNo := "O" + hex.EncodeToString(sum[:8])
			if variant == 1 {
				orderNo += "b"
			}
			id, _ := strconv.ParseUint(caller, 10, 64)
			owners.Store(orderNo, id)
			return idempotencytest.Request{
				Path: "/payments", Key: key, Token: f.svc.Token(t, id),
				Body: []byte(`{"order_no":"` + orderNo + `"}`),
			}
		},
		Effects: func(t testing.TB) int {
			var n int
			if err := f.svc.DB.Raw("SELECT COUNT(*) FROM payments").Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		},
		WantStatus: http.StatusCreated,
		Callers:    [2]string{"1", "2"},
	})
}
