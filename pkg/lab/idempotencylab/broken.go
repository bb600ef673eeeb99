// Package idempotencylab holds incident 4's broken Idempotency-Key guard,
// kept out of pkg/idempotency (which a fork keeps) so that it can be run
// and read beside the fixes, idempotency.Middleware's Handler and
// HandlerInTx. A service's lab plugs it in, in lab mode only.
package idempotencylab

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
)

// BrokenCheckThenAct is incident 4's BROKEN entry guard over m's records,
// logging to log the duplicates it lets through.
//
// It is the guard many teams write first: look the key up; if it is absent,
// run the handler; store the key and the response after. Sequential retries
// are replayed correctly, so it passes every single-threaded test. What
// breaks is concurrency: a double click or a client retry after a timeout
// arrives while the first request is still inside the handler, the lookup
// finds nothing (the first request stores its key only when it is done), and
// the handler runs again. Every request that arrives in that window creates
// its own order. The unique key on idempotency_record does reject all but
// one of the stores that follow, but by then every order has committed; the
// duplicates are only logged.
//
// The fixes make the unique insert the claim, before the handler runs
// (Handler) or last in its transaction (HandlerInTx, POST /orders): one
// request's effect commits, and the others get 409 or the replay.
func BrokenCheckThenAct(m *idempotency.Middleware, log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		req, ok := m.Read(c)
		if !ok {
			return
		}
		ctx := c.Request.Context()

		// Check: is the key known?
		rec, err := m.Store().Get(ctx, req.Scope, req.Key)
		switch {
		case err == nil && rec.Fingerprint != req.Fingerprint:
			problem.Abort(c, http.StatusUnprocessableEntity, "this Idempotency-Key was already used with a different request")
			return
		case err == nil:
			idempotency.WriteReplay(c, rec.Response)
			return
		case !errors.Is(err, gorm.ErrRecordNotFound):
			problem.Abort(c, http.StatusServiceUnavailable, "the idempotency store is unavailable")
			return
		}

		// Act: the key was absent, so run the handler. THE RACE WINDOW: every
		// request with this key that reaches the check above before the
		// insert below lands runs the handler too.
		w := &idempotency.CaptureWriter{ResponseWriter: c.Writer}
		c.Writer = w
		c.Next()

		// Store the key after the fact. For every racer but one the unique
		// key refuses the insert, long after its order committed.
		resp, store := m.Stored(w.Status(), w.Header(), w.Body())
		if !store {
			return
		}
		res, err := m.Store().ClaimCompleted(ctx, nil, req.Scope, req.Key, req.Fingerprint, resp, m.Retention())
		switch {
		case err != nil:
			log.ErrorContext(ctx, "broken idempotency guard: storing the key failed", "idempotency_key", req.Key, "err", err)
		case res.Outcome != idempotency.Claimed:
			log.WarnContext(ctx, "broken idempotency guard: another request stored this key first; this one ran the handler anyway",
				"idempotency_key", req.Key)
		}
	}
}
