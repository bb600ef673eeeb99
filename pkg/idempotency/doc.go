// Package idempotency makes a non-idempotent endpoint (POST /orders,
// POST /payments) safe to retry: requests carrying the same Idempotency-Key
// have one effect, and every retry gets the first response back, byte for
// byte. It follows the IETF httpapi draft "The Idempotency-Key HTTP Header
// Field" and Stripe's public behaviour.
//
// # Semantics
//
//   - The key comes from the Idempotency-Key header: 8 to 255 printable ASCII
//     characters (a structured-field quoted string is unquoted). Missing or
//     malformed: 400.
//   - A key is scoped by the caller (the user of the token auth.Middleware
//     verified before the guard; "anonymous" without one), the method and
//     the route, so two callers' equal keys never meet.
//   - The request's fingerprint is SHA-256 over the method, the route and the
//     canonical body (JSON re-encoded with sorted keys; other bodies as sent).
//     The same key with another fingerprint: 422.
//   - The same key while the first request is still running: 409 with
//     Retry-After: 1. Under HandlerInTx a copy that the entry layer did not
//     see (Redis down or flushed) waits for the first to commit instead, and
//     gets its response replayed (see Guards).
//   - The same key after it completed: the stored status, the headers listed
//     in Config.ReplayHeaders and the body, plus Idempotent-Replayed: true.
//   - Terminal outcomes are stored: 1xx–3xx (SUCCEEDED) and the 4xx a retry
//     would get again (FAILED); see DefaultTerminal. Transient outcomes
//     (5xx, a panic, a timeout) release the key, so the retry runs the
//     handler again; handlers must therefore be safe to re-run after a
//     failure (unique business keys, state machines).
//   - A request that holds its key longer than Config.LockTTL (it crashed or
//     hangs) loses it to the next retry. Under Handler its own completion
//     then fails with ErrClaimLost and its transaction rolls back. Under
//     HandlerInTx nothing of it has committed, so the retry runs, and of the
//     two transactions the first to commit its record counts; the other
//     gets ErrDuplicateRequest and rolls back.
//   - Lock and retention times come from the application clock: replicas are
//     assumed NTP-synchronised, with a skew far below Config.LockTTL. The
//     lock is not renewed while the handler runs, so LockTTL must exceed the
//     longest request (the HTTP write timeout is a good floor).
//   - Records are kept for Config.Retention after completion (24 h by
//     default); past it the key is forgotten, and the Archiver deletes the
//     row in bounded batches, on one replica at a time (pkg/redislock).
//   - Every error is application/problem+json.
//
// # Layers
//
// Redis is the entry layer: one Lua script sets the key to the fingerprint
// with SET NX EX and answers first, duplicate or mismatch in one round trip,
// with the age of an entry it had. Its answer is only a hint that lets
// duplicates skip the insert. The table idempotency_record is the truth: the
// claim is an INSERT that its unique (scope, key) lets through once — never
// a read followed by a write. A row whose lock or retention ran out is taken
// over by a conditional UPDATE (Handler) or cleared by a conditional DELETE
// so the retry's insert can claim the key (HandlerInTx). With Redis down,
// slow or flushed, the middleware logs, counts
// (idempotency_redis_fallbacks_total) and decides on the database alone;
// after a failure it does not ask Redis again for two seconds.
//
// # Guards
//
// The middleware has two guards with the semantics above; they differ in
// where the claim is made.
//
// HandlerInTx is for a handler whose every effect is one database
// transaction that ends with CompleteInTx, as POST /orders is. The claim is
// made there: CompleteInTx inserts the completed record (SUCCEEDED or FAILED
// with the response) in the business transaction, so a guarded request
// commits once, as an unguarded one does. A duplicate whose Redis entry is
// younger than Config.LockTTL, with no record committed yet, gets 409: the
// first request is still running. A duplicate Redis did not see runs the
// handler, and its insert waits on the first request's uncommitted row;
// when the first commits, CompleteInTx returns ErrDuplicateRequest, the
// handler returns it so its transaction rolls back, and the middleware
// answers with the first response replayed (the handler's own response is
// buffered, and discarded). If the first rolls back instead, the
// duplicate's insert goes through and it is the one that counts. A handler
// with any effect outside that transaction (a call to another service, a
// message published outside the outbox, a second transaction) must not use
// it: two concurrent duplicates can both get that far. A success answered
// without CompleteInTx under HandlerInTx is logged once per route as such a
// misuse.
//
// Handler is for every other handler, as POST /payments is (its charge
// request to the payment platform is outside any transaction). It claims
// the key with a PROCESSING record committed on its own before the handler
// runs, so a duplicate sees the claim at once and gets 409, whatever Redis
// says; the handler then completes the record, in its transaction with
// CompleteInTx or, when it does not call it, by a statement of the
// middleware after it returns. That is a second commit per request, which a
// commit-bound service pays in throughput (docs/benchmarks/idempotency.md).
//
// # Wiring
//
// Apply Migrations with the service's own, build one Middleware, install
// HandlerInTx or Handler (see Guards) on the routes that need it, and
// schedule the Archiver:
//
//	rt, err := platform.Start(ctx, cfg.Platform, platform.Options{
//		Migrations: []migrate.Source{migrations.Source, outbox.Migrations, idempotency.Migrations},
//		// …
//	})
//	idem, err := idempotency.New(rt.DB, rt.Redis, cfg.Idempotency, rt.Log, rt.Registry)
//	arch, err := idempotency.NewArchiver(idem.Store(), redislock.New(rt.Redis, "lock:order:"), cfg.Idempotency, rt.Log, rt.Registry)
//	if err := arch.Start(ctx); err != nil { … }
//	rt.OnShutdown("idempotency archiver", arch.Stop)
//	rt.HTTP.Engine().POST("/orders", idem.HandlerInTx(), h.createOrder)  // completes in its transaction
//	rt.HTTP.Engine().POST("/payments", idem.Handler(), h.createPayment) // calls the payment platform
//
// where the service's Config embeds idempotency.Config (its variables are
// IDEMPOTENCY_*).
//
// A handler whose business write is a database transaction completes the
// record in that same transaction, so the order and "this key produced this
// response" commit together: there is no moment where the order exists and
// the key has no outcome (a crash there would let a retry create a second
// order), and a lost COMMIT acknowledgement leaves a record that is
// replayed, not released. The use case takes a hook it runs last inside its
// transaction; the handler builds the response body there and calls
// CompleteInTx:
//
//	// app: the use case runs the caller's hook inside its transaction.
//	func (a *App) CreateOrder(ctx context.Context, cmd CreateOrder, inTx func(tx *gorm.DB, o order.Order) error) (order.Order, error)
//
//	// httpapi: the hook completes the idempotency record.
//	var body []byte
//	o, err := h.app.CreateOrder(ctx, cmd, func(tx *gorm.DB, o order.Order) error {
//		var err error
//		if body, err = json.Marshal(toOrderResponse(o)); err != nil {
//			return err
//		}
//		return idempotency.CompleteInTx(ctx, tx, http.StatusCreated, body)
//	})
//	switch {
//	case errors.Is(err, idempotency.ErrDuplicateRequest):
//		c.Abort() // rolled back; the middleware answers from the record
//	case err != nil: … write the problem; a 5xx releases the key …
//	default: c.Data(http.StatusCreated, idempotency.JSONContentType, body)
//	}
//
// ctx must be the request's context (c.Request.Context(), or the
// *gin.Context itself). Without the middleware CompleteInTx does nothing, so
// the same use case serves routes with and without it. ErrDuplicateRequest
// comes only under HandlerInTx. The transaction must roll back on it (return
// it, wrapped or not, from the transaction), or the duplicate's business
// writes would commit without a record; whatever the handler writes after
// is discarded. A response written without CompleteInTx (a 400 before the
// transaction) is recorded by the middleware after the handler returns, in
// a statement of its own.
//
// Package idempotencytest races requests at any http.Handler and checks the
// answers; its RunSuite runs this package's core checks (50-way race, retries,
// 422, 400, two callers) on a service's real route:
//
//	idempotencytest.RunSuite(t, idempotencytest.Target{
//		Handler:    srv.Handler(),
//		Request:    func(key, user string, variant int) idempotencytest.Request { … },
//		Effects:    func(t testing.TB) int { … SELECT COUNT(*) FROM orders … },
//		WantStatus: http.StatusCreated,
//		Callers:    [2]string{"1", "2"},
//	})
package idempotency
