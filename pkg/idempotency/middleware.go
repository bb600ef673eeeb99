package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/problem"
)

// Header names.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// anonymousCaller scopes requests without a verified caller (no
// auth.Middleware before the guard). Routes that serve anonymous callers
// share one key space, so clients must use random keys.
const anonymousCaller = "anonymous"

// retryAfterSeconds is the Retry-After of a 409.
const retryAfterSeconds = "1"

// finishTimeout bounds the record write after the handler, which must happen
// even when the client has gone and the request context is cancelled.
const finishTimeout = 5 * time.Second

// Middleware enforces Idempotency-Key on the routes it is installed on. One
// Middleware serves every route of a service: keys are scoped by route.
type Middleware struct {
	store    *Store
	entry    *Entry
	cfg      Config
	terminal func(int) bool
	log      *slog.Logger
	metrics  *counters
	lastWarn atomic.Int64 // unix nanos of the last Redis fallback warning
	// entryPausedUntil (unix nanos) skips the entry layer after a Redis
	// failure, for entryPause.
	entryPausedUntil atomic.Int64
	// unguarded holds the routes HandlerInTx warned about (warnUnguarded).
	unguarded sync.Map
}

// New returns the middleware over db (with Migrations applied) and rdb, the
// entry layer; rdb may be nil to run on the database alone. Its metrics are
// registered on reg.
func New(db *gorm.DB, rdb redis.Scripter, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	counters, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("idempotency metrics: %w", err)
	}
	m := &Middleware{store: NewStore(db), cfg: cfg, terminal: cfg.Terminal, log: log, metrics: counters}
	if m.terminal == nil {
		m.terminal = DefaultTerminal
	}
	if rdb != nil {
		m.entry = NewEntry(rdb, cfg.EntryPrefix, cfg.EntryTTL)
	}
	return m, nil
}

// Store returns the middleware's record store (for the archiver and tests).
func (m *Middleware) Store() *Store { return m.store }

// request is what the middleware reads from a guarded request before it
// decides anything.
type request struct {
	scope, key, fp string
}

// Request is a guarded request as every guard identifies it: its scope
// (caller, method, route), its key and its body's fingerprint.
type Request struct{ Scope, Key, Fingerprint string }

// Read reads c's request as the middleware does (its key, its caller, its
// body, put back for the handler), for a guard written outside the package
// (pkg/lab's broken one). On bad input it answers and returns false.
func (m *Middleware) Read(c *gin.Context) (Request, bool) {
	r, ok := m.parse(c)
	return Request{Scope: r.scope, Key: r.key, Fingerprint: r.fp}, ok
}

// WriteReplay writes a stored response as the middleware replays one: byte for
// byte, marked with HeaderReplayed.
func WriteReplay(c *gin.Context, r Response) { replay(c, r) }

// Stored is the part of the response to c that the middleware would store,
// and whether it would (Config.Terminal): its status, the replay headers
// and body.
func (m *Middleware) Stored(status int, h http.Header, body []byte) (Response, bool) {
	return Response{Status: status, Header: m.selectHeaders(h), Body: body}, m.terminal(status)
}

// Retention is how long a stored response answers its key.
func (m *Middleware) Retention() time.Duration { return m.cfg.Retention }

// parse validates the key and the caller, reads the body (putting it back
// for the handler) and computes the scope and fingerprint. On bad input it
// answers and returns false.
func (m *Middleware) parse(c *gin.Context) (request, bool) {
	raw := c.GetHeader(HeaderKey)
	if raw == "" {
		m.reject(c, outcomeMissing, http.StatusBadRequest, "the Idempotency-Key header is required on this endpoint")
		return request{}, false
	}
	key, err := ParseKey(raw)
	if err != nil {
		m.reject(c, outcomeInvalid, http.StatusBadRequest, err.Error())
		return request{}, false
	}
	caller := anonymousCaller
	if p, ok := auth.FromContext(c.Request.Context()); ok {
		caller = strconv.FormatUint(p.UserID, 10)
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			problem.Abort(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooLarge.Limit))
			return request{}, false
		}
		problem.Abort(c, http.StatusBadRequest, "could not read the request body")
		return request{}, false
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))

	route := c.FullPath()
	if route == "" {
		route = c.Request.URL.Path
	}
	return request{scope: scopeOf(caller, c.Request.Method, route), key: key, fp: Fingerprint(c.Request.Method, route, body)}, true
}

// Handler returns the gin middleware. Install it on the routes that need it:
//
//	r.POST("/payments", idem.Handler(), h.createPayment)
//
// It claims the key with a statement of its own, committed before the
// handler runs, so it guards any handler. A handler whose effect is one
// database transaction ending with CompleteInTx can use HandlerInTx, which
// saves that commit.
func (m *Middleware) Handler() gin.HandlerFunc {
	return func(c *gin.Context) {
		req, ok := m.parse(c)
		if !ok {
			return
		}
		scope, key, fp := req.scope, req.key, req.fp
		ctx := c.Request.Context()

		res, err := m.store.Claim(ctx, scope, key, fp, m.cfg.LockTTL, m.cfg.Retention, m.hint(ctx, scope, key, fp) != HintFirst)
		if err != nil {
			m.log.ErrorContext(ctx, "idempotency claim failed", "idempotency_key", key, "scope", scope, "err", err)
			problem.Abort(c, http.StatusServiceUnavailable, "the idempotency store is unavailable; retry with the same Idempotency-Key")
			return
		}
		if res.Outcome == Claimed {
			m.metrics.requests.WithLabelValues(outcomeFirst).Inc()
			m.run(c, res.Claim)
			return
		}
		m.answer(c, res)
	}
}

// answer writes the response of a request that does not run the handler:
// 422, 409 or the stored response replayed.
func (m *Middleware) answer(c *gin.Context, res ClaimResult) {
	switch res.Outcome {
	case Mismatch:
		m.reject(c, outcomeMismatch, http.StatusUnprocessableEntity,
			"this Idempotency-Key was already used with a different request; use a new key for a new request")
	case InProgress:
		// Most requests finish well within a second, so the client is asked
		// to come back in one, not when the holder's lock would run out (up
		// to IDEMPOTENCY_LOCK_TTL, which only a crashed holder reaches).
		c.Header("Retry-After", retryAfterSeconds)
		m.reject(c, outcomeConflict, http.StatusConflict,
			"a request with this Idempotency-Key is still being processed; retry later with the same key")
	case Replay:
		m.metrics.requests.WithLabelValues(outcomeReplayed).Inc()
		replay(c, res.Record.Response)
	}
}

// entryPause is how long the middleware leaves the entry layer alone after
// Redis failed: a Redis that refuses connections takes the client most of a
// second to give up on (it retries its dials), which every guarded request
// would otherwise pay. The first request after the pause tries again.
const entryPause = 2 * time.Second

// hint asks the entry layer; when Redis fails it answers HintFirst, so the
// database insert decides alone, and logs (at most every 10 s) and counts.
func (m *Middleware) hint(ctx context.Context, scope, key, fp string) Hint {
	h, _ := m.hintAge(ctx, scope, key, fp)
	return h
}

// hintAge is hint with the age of the entry Redis had (see Entry.CheckAge).
func (m *Middleware) hintAge(ctx context.Context, scope, key, fp string) (Hint, time.Duration) {
	if m.entry == nil {
		return HintFirst, 0
	}
	if time.Now().UnixNano() < m.entryPausedUntil.Load() {
		m.metrics.fallbacks.Inc()
		return HintFirst, 0
	}
	h, age, err := m.entry.CheckAge(ctx, scope, key, fp)
	if err != nil {
		m.metrics.fallbacks.Inc()
		now := time.Now().UnixNano()
		if ctx.Err() == nil {
			// Redis failed, not the request: pause the entry layer.
			m.entryPausedUntil.Store(now + int64(entryPause))
		}
		if last := m.lastWarn.Load(); now-last > int64(10*time.Second) && m.lastWarn.CompareAndSwap(last, now) {
			m.log.WarnContext(ctx, "idempotency entry layer unavailable, deciding on the database alone", "err", err)
		}
		return HintFirst, 0
	}
	return h, age
}

func (m *Middleware) reject(c *gin.Context, outcome string, status int, detail string) {
	m.metrics.requests.WithLabelValues(outcome).Inc()
	problem.Abort(c, status, detail)
}

// replay writes a stored response byte for byte, marked as replayed.
func replay(c *gin.Context, r Response) {
	h := c.Writer.Header()
	for name, values := range r.Header {
		h.Del(name)
		for _, v := range values {
			h.Add(name, v)
		}
	}
	h.Set(HeaderReplayed, "true")
	c.Abort()
	c.Writer.WriteHeader(r.Status)
	_, _ = c.Writer.Write(r.Body)
}

// run executes the handler under claim and records its outcome.
func (m *Middleware) run(c *gin.Context, claim *Claim) {
	w := &CaptureWriter{ResponseWriter: c.Writer}
	st := &claimState{m: m, claim: claim, header: w.Header()}
	c.Set(ginStateKey, st)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), stateKey{}, st))
	c.Writer = w

	finished := false
	defer func() {
		if !finished {
			// The handler panicked: its outcome is unknown, so the key is
			// given back (a committed in-transaction completion is kept), and
			// the panic goes on to the recovery middleware.
			m.release(c.Request.Context(), claim, st)
		}
	}()
	c.Next()
	finished = true

	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), finishTimeout)
	defer cancel()
	status := w.Status()
	if !m.terminal(status) {
		m.release(ctx, claim, st)
		return
	}
	resp := Response{Status: status, Header: m.selectHeaders(w.Header()), Body: w.body.Bytes()}
	if stored, ok := st.completedInTx(); ok {
		if stored.Status == resp.Status && bytes.Equal(stored.Body, resp.Body) {
			return // the handler's transaction stored exactly what went out
		}
		// The handler stored one response and wrote another (or its
		// transaction rolled back and it answered anyway). Store what went
		// out if the record is still open; if the transaction committed, the
		// update finds nothing to do and the committed response stays.
		m.log.ErrorContext(ctx, "idempotency: handler wrote a response different from the one it completed in its transaction",
			"idempotency_key", claim.Key, "stored_status", stored.Status, "written_status", resp.Status)
	}
	err := m.store.Complete(ctx, nil, claim, resp, m.cfg.Retention)
	switch {
	case errors.Is(err, ErrClaimLost):
		if _, inTx := st.completedInTx(); !inTx {
			m.metrics.lost.Inc()
			m.log.WarnContext(ctx, "idempotency claim was taken over before the handler finished; its response is not recorded",
				"idempotency_key", claim.Key, "scope", claim.Scope)
		}
	case err != nil:
		// The record stays PROCESSING until its lock runs out; a retry then
		// runs the handler again, which the handler must tolerate.
		m.log.ErrorContext(ctx, "idempotency completion failed", "idempotency_key", claim.Key, "err", err)
	}
}

func (m *Middleware) release(ctx context.Context, claim *Claim, st *claimState) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	released, err := m.store.Release(ctx, claim)
	if err != nil {
		m.log.ErrorContext(ctx, "idempotency release failed; the key stays locked until its lock runs out",
			"idempotency_key", claim.Key, "err", err)
		return
	}
	if !released {
		return // completed in the handler's committed transaction, or taken over
	}
	m.metrics.released.Inc()
	m.forget(ctx, request{scope: claim.Scope, key: claim.Key, fp: claim.Fingerprint})
}

func (m *Middleware) selectHeaders(h http.Header) http.Header {
	out := http.Header{}
	for _, name := range m.cfg.ReplayHeaders {
		if vs := h.Values(name); len(vs) > 0 {
			out[http.CanonicalHeaderKey(name)] = append([]string(nil), vs...)
		}
	}
	return out
}

// CaptureWriter passes a response through and keeps a copy of its body:
// what a guard hands to Stored once the handler has answered.
type CaptureWriter struct {
	gin.ResponseWriter
	body bytes.Buffer
}

func (w *CaptureWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *CaptureWriter) WriteString(s string) (int, error) {
	w.body.WriteString(s)
	return w.ResponseWriter.WriteString(s)
}

// Body is the copy of what was written.
func (w *CaptureWriter) Body() []byte { return w.body.Bytes() }
