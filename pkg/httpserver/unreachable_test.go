package httpserver_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestUnreachableDatabaseIs503: a handler whose database cannot be reached
// (here a real one, cut off by its forwarder) answers 503 problem+json with
// a Retry-After, not 500; any other error falls through to the error map's
// own answer.
func TestUnreachableDatabaseIs503(t *testing.T) {
	cfg, name := testenv.NewDatabase(t)
	fw := testenv.NewForwarder(t, cfg.Addr)
	cfg.Addr = fw.Addr()
	db, err := database.Open(t.Context(), cfg, name, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })

	s := newServer(t, nil)
	fail := func(c *gin.Context, err error) {
		if httpserver.Unreachable(c, testenv.Logger(t), err) {
			return
		}
		problem.Abort(c, http.StatusInternalServerError, "internal error")
	}
	s.Engine().GET("/read", func(c *gin.Context) {
		var n int
		if err := db.WithContext(c.Request.Context()).Raw("SELECT 1").Scan(&n).Error; err != nil {
			fail(c, err)
			return
		}
		c.Status(http.StatusOK)
	})
	s.Engine().GET("/other", func(c *gin.Context) { fail(c, errors.New("a bug")) })

	if w := do(t, s.Handler(), httptest.NewRequest(http.MethodGet, "/read", nil)); w.Code != http.StatusOK {
		t.Fatalf("with the database up: %d", w.Code)
	}
	fw.Close()
	w := do(t, s.Handler(), httptest.NewRequest(http.MethodGet, "/read", nil))
	if secs, err := strconv.Atoi(w.Header().Get("Retry-After")); w.Code != http.StatusServiceUnavailable || err != nil || secs < 1 {
		t.Fatalf("with the database cut: %d, Retry-After %q; want 503 with a Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	decodeProblem(t, w, http.StatusServiceUnavailable)
	if w := do(t, s.Handler(), httptest.NewRequest(http.MethodGet, "/other", nil)); w.Code != http.StatusInternalServerError {
		t.Fatalf("another error: %d, want the error map's 500", w.Code)
	}
}
