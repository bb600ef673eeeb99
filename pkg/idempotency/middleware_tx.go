package idempotency

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/problem"
)

// ErrDuplicateRequest is what CompleteInTx returns under HandlerInTx when
// another request with the same key committed first (or holds the key, or
// used it with another body). The business transaction must roll back; the
// middleware then answers the request from the key's record (the replay, a
// 409 or a 422) and discards whatever the handler wrote.
var ErrDuplicateRequest = errors.New("idempotency: another request with this Idempotency-Key came first; roll back")

// HandlerInTx returns the middleware for a handler whose every effect is one
// database transaction that calls CompleteInTx last. The claim is made
// there, by CompleteInTx: one INSERT of the completed record in the business
// transaction, so a guarded request commits once, as an unguarded one does.
// (Handler commits its claim before the handler runs: a second commit per
// request, which a commit-bound service pays in throughput.) A handler with
// an effect outside that transaction (a call to another service, a file, a
// second transaction) must use Handler: under HandlerInTx two concurrent
// duplicates can both get that far. A success answered without CompleteInTx
// is logged once per route as such a misuse.
//
// Semantics are Handler's, with one difference in timing: a duplicate that
// arrives while the first request runs and that the entry layer has not
// seen (Redis down or flushed) runs the handler too, and its transaction
// waits at the record insert on the first one's uncommitted row. When the
// first commits, the duplicate's insert fails on the unique key,
// CompleteInTx returns ErrDuplicateRequest, its transaction rolls back, and
// it is answered with the first response replayed. When the first rolls
// back, the duplicate's insert goes through and it is the one that counts.
// Either way one transaction commits. With Redis up, a duplicate of a
// request still running gets 409 with Retry-After, as under Handler, as
// long as the key's entry is younger than Config.LockTTL; an older entry
// with no record behind it is a request that died, and the key is free.
// A record past its retention, or a PROCESSING claim left by Handler whose
// lock ran out, is cleared and answered 409: the retry claims the key.
//
// The handler's response is buffered until its outcome is known, so it can
// be replaced by the record's answer. A response written without
// CompleteInTx (a 400 before the transaction) is stored after the handler
// returns, by an insert of its own; if another request's record got there
// first, that record answers instead. A transient failure (5xx) stores
// nothing, unless a record of this key and body committed meanwhile (the
// COMMIT went through but its acknowledgement was lost, or a concurrent
// duplicate won), in which case the record answers.
func (m *Middleware) HandlerInTx() gin.HandlerFunc {
	return func(c *gin.Context) {
		req, ok := m.parse(c)
		if !ok {
			return
		}
		ctx := c.Request.Context()
		if hint, age := m.hintAge(ctx, req.scope, req.key, req.fp); hint != HintFirst {
			rec, err := m.store.Get(ctx, req.scope, req.key)
			switch {
			case err == nil:
				if res, decided := decide(rec, req.fp, m.store.now()); decided {
					m.answer(c, res)
					return
				}
				// Past retention or a dead claim: clear it, so the claim in
				// the transaction is a plain insert.
				m.clearStale(ctx, rec)
			case !errors.Is(err, gorm.ErrRecordNotFound):
				m.log.ErrorContext(ctx, "idempotency read failed", "idempotency_key", req.key, "scope", req.scope, "err", err)
				problem.Abort(c, http.StatusServiceUnavailable, "the idempotency store is unavailable; retry with the same Idempotency-Key")
				return
			case hint == HintDuplicate && age < m.cfg.LockTTL:
				// Redis saw this request moments ago and no record has
				// committed: the first one is still running.
				m.answer(c, ClaimResult{Outcome: InProgress})
				return
			}
		}
		m.runInTx(c, req)
	}
}

// runInTx runs the handler with its response buffered and the key pending,
// then writes the outcome: the handler's response, or the record's answer.
func (m *Middleware) runInTx(c *gin.Context, req request) {
	orig := c.Writer
	w := newBufferWriter(orig)
	st := &claimState{m: m, pending: &req, header: w.Header()}
	c.Set(ginStateKey, st)
	c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), stateKey{}, st))
	c.Writer = w

	finished := false
	defer func() {
		c.Writer = orig
		if !finished {
			// The handler panicked: nothing of its response is sent, the
			// recovery middleware answers on the real writer, and the key
			// is free unless its transaction committed.
			m.freeKey(context.WithoutCancel(c.Request.Context()), req)
		}
	}()
	c.Next()
	finished = true
	c.Writer = orig

	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), finishTimeout)
	defer cancel()
	if res, ok := st.answered(); ok {
		m.answerFromRecord(ctx, c, req, res)
		return
	}
	resp := Response{Status: w.Status(), Header: m.selectHeaders(w.Header()), Body: w.body.Bytes()}
	if !m.terminal(resp.Status) {
		// A transient failure stores nothing. But the transaction may have
		// committed all the same (its COMMIT acknowledgement was lost), or
		// a concurrent duplicate committed: then that record is the answer.
		if rec, err := m.store.Get(ctx, req.scope, req.key); err == nil {
			if res, decided := decide(rec, req.fp, m.store.now()); decided && res.Outcome == Replay {
				m.answer(c, res)
				return
			}
		}
		m.freeKey(ctx, req)
		w.flush()
		return
	}
	stored, inTx := st.completedInTx()
	switch {
	case inTx && stored.Status == resp.Status && bytes.Equal(stored.Body, resp.Body) && sameHeaders(stored.Header, resp.Header):
		m.metrics.requests.WithLabelValues(outcomeFirst).Inc()
		w.flush() // the handler's transaction stored exactly what goes out
		return
	case inTx:
		m.log.ErrorContext(ctx, "idempotency: handler wrote a response different from the one it completed in its transaction",
			"idempotency_key", req.key, "stored_status", stored.Status, "written_status", resp.Status,
			"stored_headers", stored.Header, "written_headers", resp.Header)
	case resp.Status < 300:
		m.warnUnguarded(ctx, c.FullPath())
	}
	// A terminal response the transaction did not store (a 4xx before the
	// transaction, or a transaction that rolled back): store it now, unless
	// a record got there first, which then answers.
	res, err := m.store.ClaimCompleted(ctx, nil, req.scope, req.key, req.fp, resp, m.cfg.Retention)
	switch {
	case err != nil:
		m.log.ErrorContext(ctx, "idempotency completion failed; the response is sent but not recorded",
			"idempotency_key", req.key, "err", err)
	case res.Outcome != Claimed:
		m.answerFromRecord(ctx, c, req, res)
		return
	}
	m.metrics.requests.WithLabelValues(outcomeFirst).Inc()
	w.flush()
}

// answerFromRecord answers a request whose claim met another request's
// record, or lost a deadlock. A stale record (see Store.ClaimCompleted) is
// cleared first; after either, the request's entry-layer marker is dropped,
// so the retry the 409 asks for goes to the database instead of meeting its
// own marker.
func (m *Middleware) answerFromRecord(ctx context.Context, c *gin.Context, req request, res ClaimResult) {
	if res.Stale {
		m.clearStale(ctx, res.Record)
	}
	if res.Stale || res.Deadlocked {
		m.forget(ctx, req)
	}
	m.answer(c, res)
}

func (m *Middleware) clearStale(ctx context.Context, rec *Record) {
	if _, err := m.store.ClearStale(ctx, rec); err != nil {
		m.log.ErrorContext(ctx, "idempotency: clearing a stale record failed", "idempotency_key", rec.Key, "err", err)
	}
}

// warnUnguarded logs, once per route, a success answered without
// CompleteInTx under HandlerInTx: whatever that handler changed was not
// guarded against a concurrent duplicate, and the route wants Handler.
func (m *Middleware) warnUnguarded(ctx context.Context, route string) {
	if _, seen := m.unguarded.LoadOrStore(route, true); !seen {
		m.log.WarnContext(ctx, "idempotency: a handler behind HandlerInTx succeeded without CompleteInTx; "+
			"its effects are not guarded against concurrent duplicates, install Handler on this route instead", "route", route)
	}
}

// freeKey counts a request that ran and left no record (a transient
// failure or a panic): the key is free, and a retry runs again.
func (m *Middleware) freeKey(ctx context.Context, req request) {
	m.metrics.requests.WithLabelValues(outcomeFirst).Inc()
	m.metrics.released.Inc()
	m.forget(ctx, req)
}

// forget drops the key's entry-layer marker, so a retry goes straight to the
// database.
func (m *Middleware) forget(ctx context.Context, req request) {
	if m.entry == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	if err := m.entry.Forget(ctx, req.scope, req.key, req.fp); err != nil {
		m.log.DebugContext(ctx, "idempotency entry forget failed", "err", err)
	}
}

// bufferWriter holds a handler's response until the middleware knows it is
// the one to send. Headers go to a copy of the real writer's, status and
// body to memory; flush sends them.
type bufferWriter struct {
	gin.ResponseWriter
	header  http.Header
	status  int
	written bool
	body    bytes.Buffer
}

func newBufferWriter(w gin.ResponseWriter) *bufferWriter {
	return &bufferWriter{ResponseWriter: w, header: w.Header().Clone(), status: http.StatusOK}
}

func (w *bufferWriter) Header() http.Header { return w.header }

func (w *bufferWriter) WriteHeader(code int) {
	if code > 0 && !w.written {
		w.status = code
	}
}

func (w *bufferWriter) WriteHeaderNow() { w.written = true }

func (w *bufferWriter) Write(b []byte) (int, error) {
	w.written = true
	return w.body.Write(b)
}

func (w *bufferWriter) WriteString(s string) (int, error) {
	w.written = true
	return w.body.WriteString(s)
}

func (w *bufferWriter) Status() int   { return w.status }
func (w *bufferWriter) Written() bool { return w.written }

func (w *bufferWriter) Size() int {
	if !w.written {
		return -1
	}
	return w.body.Len()
}

// Flush does nothing: no byte may reach the client before the outcome is
// known.
func (w *bufferWriter) Flush() {}

// Pusher reports no HTTP/2 push support while buffering.
func (w *bufferWriter) Pusher() http.Pusher { return nil }

// flush sends the buffered response on the real writer.
func (w *bufferWriter) flush() {
	h := w.ResponseWriter.Header()
	for name := range h {
		if _, ok := w.header[name]; !ok {
			h.Del(name)
		}
	}
	for name, values := range w.header {
		h[name] = values
	}
	w.ResponseWriter.WriteHeader(w.status)
	if w.body.Len() == 0 {
		w.ResponseWriter.WriteHeaderNow()
		return
	}
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
}

// sameHeaders reports whether a and b carry the same values; both hold only
// replay headers.
func sameHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b.Values(k)) {
			return false
		}
	}
	return true
}
