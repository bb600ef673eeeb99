package idempotency

import (
	"context"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

// stateKey carries the request's claim in its context.
type stateKey struct{}

// ginStateKey carries it in the gin context too, for handlers that pass a
// *gin.Context as their context on an engine without ContextWithFallback.
const ginStateKey = "oncemall.idempotency.claim"

type claimState struct {
	m *Middleware
	// claim is the key's claim: made before the handler under Handler; under
	// HandlerInTx, pending until CompleteInTx makes it.
	claim   *Claim
	pending *request
	// header is the handler's response header as it writes it; CompleteInTx
	// stores the replay headers (Config.ReplayHeaders) set on it so far.
	header http.Header

	mu     sync.Mutex
	stored *Response
	// answer is set under HandlerInTx when CompleteInTx found the key taken:
	// the record, not the handler, answers the request.
	answer *ClaimResult
}

func (s *claimState) answered() (ClaimResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answer == nil {
		return ClaimResult{}, false
	}
	return *s.answer, true
}

func (s *claimState) completedInTx() (Response, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stored == nil {
		return Response{}, false
	}
	return *s.stored, true
}

func stateFrom(ctx context.Context) *claimState {
	if st, ok := ctx.Value(stateKey{}).(*claimState); ok {
		return st
	}
	if gc, ok := ctx.(*gin.Context); ok {
		if v, ok := gc.Get(ginStateKey); ok {
			st, _ := v.(*claimState)
			return st
		}
	}
	return nil
}

// JSONContentType is the Content-Type CompleteInTx stores; the handler must
// write its response with the same one (gin's c.Data(status, JSONContentType,
// body)).
const JSONContentType = "application/json"

// CompleteInTx records status and body (a JSON document) as this request's
// response inside tx, the handler's business transaction, so the business
// change and the record's completion commit or roll back together. The
// headers in Config.ReplayHeaders that the handler has set on its response
// by then (a Location) are recorded too, so set them first. Call it last in
// the transaction and write exactly body after the commit:
//
//	err := db.Transaction(func(tx *gorm.DB) error {
//		// … the business writes …
//		c.Header("Location", "/orders/"+no)
//		return idempotency.CompleteInTx(ctx, tx, http.StatusCreated, body)
//	})
//	// on success: c.Data(http.StatusCreated, idempotency.JSONContentType, body)
//
// It returns ErrClaimLost when the claim was taken over meanwhile (the
// request outlived IDEMPOTENCY_LOCK_TTL and a retry took the key): the
// transaction must then roll back, so the retry's effect is the only one.
// Under HandlerInTx it makes the claim itself, by inserting the completed
// record, and returns ErrDuplicateRequest when another request with the key
// came first: the transaction must roll back, and the middleware answers.
// Outside the middleware (no claim in ctx) it does nothing and returns nil,
// so a use case works the same with and without it.
func CompleteInTx(ctx context.Context, tx *gorm.DB, status int, body []byte) error {
	st := stateFrom(ctx)
	if st == nil {
		return nil
	}
	header := st.m.selectHeaders(st.header)
	header.Set("Content-Type", JSONContentType)
	return CompleteResponseInTx(ctx, tx, Response{Status: status, Header: header, Body: body})
}

// CompleteResponseInTx is CompleteInTx with the stored headers chosen by the
// caller (a Location, another Content-Type). Only the headers listed in
// Config.ReplayHeaders should be set, as those are what a replay sends.
func CompleteResponseInTx(ctx context.Context, tx *gorm.DB, resp Response) error {
	st := stateFrom(ctx)
	if st == nil {
		return nil
	}
	if p := st.pending; p != nil {
		res, err := st.m.store.ClaimCompleted(ctx, tx, p.scope, p.key, p.fp, resp, st.m.cfg.Retention)
		if err != nil {
			return err
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		if res.Outcome != Claimed {
			st.answer, st.stored = &res, nil
			return ErrDuplicateRequest
		}
		st.claim, st.stored, st.answer = res.Claim, &resp, nil
		return nil
	}
	if err := st.m.store.Complete(ctx, tx, st.claim, resp, st.m.cfg.Retention); err != nil {
		return err
	}
	st.mu.Lock()
	st.stored = &resp
	st.mu.Unlock()
	return nil
}

// KeyFromContext returns the request's Idempotency-Key, when the middleware
// claimed one. A handler may store it as a business unique key too.
func KeyFromContext(ctx context.Context) (string, bool) {
	if st := stateFrom(ctx); st != nil {
		if st.pending != nil {
			return st.pending.key, true
		}
		return st.claim.Key, true
	}
	return "", false
}
