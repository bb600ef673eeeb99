package formtoken_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/problem"
)

func TestEndpointPairAcceptsEachFormOnce(t *testing.T) {
	s := newStore(t, time.Minute)
	var executed atomic.Int32
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.GET("/orders/token", s.IssueHandler(testUser))
	e.POST("/orders", s.Require(testUser, true), func(c *gin.Context) {
		executed.Add(1)
		c.Status(http.StatusCreated)
	})
	do := func(method, path, user, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if user != "" {
			req.Header.Set("X-Test-User", user)
		}
		if token != "" {
			req.Header.Set(formtoken.Header, token)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}

	rec := do(http.MethodGet, "/orders/token", "u1", "")
	var issued struct {
		Token     string `json:"token"`
		ExpiresIn int    `json:"expires_in"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &issued) != nil || issued.Token == "" || issued.ExpiresIn != 60 {
		t.Fatalf("issue: %d %s", rec.Code, rec.Body)
	}

	// A double click: 20 submits of one form at once.
	codes := make([]int, 20)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := do(http.MethodPost, "/orders", "u1", issued.Token)
			codes[i] = r.Code
			if r.Code == http.StatusConflict && r.Header().Get("Content-Type") != problem.ContentType {
				t.Errorf("409 is not problem+json")
			}
		}()
	}
	wg.Wait()
	if executed.Load() != 1 {
		t.Fatalf("handler ran %d times for one form, want 1 (codes %v)", executed.Load(), codes)
	}
	if r := do(http.MethodPost, "/orders", "u1", ""); r.Code != http.StatusBadRequest {
		t.Fatalf("missing token: %d", r.Code)
	}
	if r := do(http.MethodGet, "/orders/token", "", ""); r.Code != http.StatusUnauthorized {
		t.Fatalf("token for nobody: %d, want 401", r.Code)
	}
}

// testUser names the caller by a header of the test's own, as a service's
// auth.Subject names the verified one.
func testUser(c *gin.Context) string { return c.GetHeader("X-Test-User") }
