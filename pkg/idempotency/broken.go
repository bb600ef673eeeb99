package idempotency

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/problem"
)

// Guard modes: which entry guard a service puts in front of its route.
const (
	// GuardFixed is Handler (HandlerFor) or HandlerInTx (HandlerInTxFor):
	// the claim is a unique insert, made before the handler runs or in its
	// transaction. The default, and the only mode for production.
	GuardFixed = "fixed"
	// GuardBroken is BrokenCheckThenAct, incident 4 reproduced. Lab only.
	GuardBroken = "broken"
)

// HandlerFor returns the guard named by mode: Handler for GuardFixed,
// BrokenCheckThenAct for GuardBroken. Any other mode panics; services
// validate the setting at start-up with config.CheckOneOf.
func (m *Middleware) HandlerFor(mode string) gin.HandlerFunc {
	switch mode {
	case GuardFixed:
		return m.Handler()
	case GuardBroken:
		return m.BrokenCheckThenAct()
	}
	panic("idempotency: unknown guard mode " + mode)
}

// HandlerInTxFor is HandlerFor for a handler that completes its record in
// its transaction: HandlerInTx for GuardFixed.
func (m *Middleware) HandlerInTxFor(mode string) gin.HandlerFunc {
	if mode == GuardFixed {
		return m.HandlerInTx()
	}
	return m.HandlerFor(mode)
}

// BrokenCheckThenAct is incident 4's BROKEN entry guard, kept in the code so
// that it can be run and read beside the fixes. Never the default:
// a service selects it only through its guard-mode setting, for the lab.
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
func (m *Middleware) BrokenCheckThenAct() gin.HandlerFunc {
	return func(c *gin.Context) {
		key, err := ParseKey(c.GetHeader(HeaderKey))
		if err != nil {
			m.reject(c, outcomeMissing, http.StatusBadRequest, err.Error())
			return
		}
		caller := c.GetHeader(m.cfg.CallerHeader)
		if caller == "" {
			caller = anonymousCaller
		}
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			problem.Abort(c, http.StatusBadRequest, "could not read the request body")
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		route := c.FullPath()
		if route == "" {
			route = c.Request.URL.Path
		}
		scope := scopeOf(caller, c.Request.Method, route)
		fp := Fingerprint(c.Request.Method, route, body)
		ctx := c.Request.Context()

		// Check: is the key known?
		rec, err := m.store.Get(ctx, scope, key)
		switch {
		case err == nil && rec.Fingerprint != fp:
			m.reject(c, outcomeMismatch, http.StatusUnprocessableEntity, "this Idempotency-Key was already used with a different request")
			return
		case err == nil:
			m.metrics.requests.WithLabelValues(outcomeReplayed).Inc()
			replay(c, rec.Response)
			return
		case !errors.Is(err, gorm.ErrRecordNotFound):
			problem.Abort(c, http.StatusServiceUnavailable, "the idempotency store is unavailable")
			return
		}

		// Act: the key was absent, so run the handler. THE RACE WINDOW: every
		// request with this key that reaches the check above before the
		// insert below lands runs the handler too.
		m.metrics.requests.WithLabelValues(outcomeFirst).Inc()
		w := &captureWriter{ResponseWriter: c.Writer}
		c.Writer = w
		c.Next()

		// Store the key after the fact. For every racer but one the unique
		// key refuses the insert, long after its order committed.
		status := w.Status()
		if !m.terminal(status) {
			return
		}
		resp := Response{Status: status, Header: m.selectHeaders(w.Header()), Body: w.body.Bytes()}
		if err := m.storeAfter(c, scope, key, fp, resp); err != nil {
			if database.IsDuplicateKey(err) {
				m.log.WarnContext(ctx, "broken idempotency guard: another request stored this key first; this one ran the handler anyway",
					"idempotency_key", key)
				return
			}
			m.log.ErrorContext(ctx, "broken idempotency guard: storing the key failed", "idempotency_key", key, "err", err)
		}
	}
}

// storeAfter inserts a completed record: the "set" half of check-then-act.
func (m *Middleware) storeAfter(c *gin.Context, scope, key, fp string, resp Response) error {
	status := StatusSucceeded
	if resp.Status >= 400 {
		status = StatusFailed
	}
	headers, err := json.Marshal(resp.Header)
	if err != nil {
		return err
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	now := m.store.now()
	_, err = execSQL(c.Request.Context(), m.store.db, `INSERT INTO idempotency_record
		(scope, idem_key, fingerprint, status, owner, response_status, response_headers, response_body,
		 locked_until, expire_time, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		scope, key, fp, status, newOwner(), resp.Status, string(headers), body,
		now, now.Add(m.cfg.Retention), now, now)
	return err
}
