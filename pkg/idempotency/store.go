package idempotency

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
)

// Record statuses.
const (
	StatusProcessing = "PROCESSING"
	StatusSucceeded  = "SUCCEEDED" // a stored 1xx–3xx response
	StatusFailed     = "FAILED"    // a stored deterministic 4xx response
)

// ErrClaimLost means the claim this request held is gone: its lock expired
// and another request took it over, or it was completed already. A business
// transaction that gets it from CompleteInTx must roll back.
var ErrClaimLost = errors.New("idempotency: claim lost to another request")

// maxClaimAttempts bounds the insert / read / take-over loop. Each lap is
// caused by a concurrent delete or take-over; a few laps always settle.
const maxClaimAttempts = 5

// Outcome is what a claim attempt found.
type Outcome int

// Claim outcomes.
const (
	// Claimed: this request owns the key and must run the handler.
	Claimed Outcome = iota + 1
	// Replay: the key completed with this fingerprint; replay Record.
	Replay
	// InProgress: another request holds the key; answer 409.
	InProgress
	// Mismatch: the key was used with another fingerprint; answer 422.
	Mismatch
)

// Claim identifies the request that owns a key until it completes or
// releases it.
type Claim struct {
	Scope, Key, Fingerprint string
	id                      uint64
	owner                   string
}

// Response is a stored response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Record is a row of idempotency_record.
type Record struct {
	ID                                     uint64
	Scope, Key, Fingerprint, Status, Owner string
	Response                               Response
	LockedUntil, ExpireTime                time.Time
}

// ClaimResult is the answer of Store.Claim.
type ClaimResult struct {
	Outcome Outcome
	Claim   *Claim        // set when Claimed
	Record  *Record       // set when Replay
	Wait    time.Duration // set when InProgress: how long the holder's lock still runs
	// Stale (with InProgress, from ClaimCompleted): Record is past its
	// retention or an expired claim, to clear with ClearStale.
	Stale bool
	// Deadlocked (with InProgress, from ClaimCompleted): the database
	// chose this request's transaction as a deadlock victim and rolled it
	// back. Nothing of this request holds the key, and the other side of
	// the deadlock may not have been a request for it.
	Deadlocked bool
}

// Store keeps idempotency records in the service's database.
type Store struct {
	db  *gorm.DB
	now func() time.Time
	// afterRead, when set (by tests), runs between a claim's read and its
	// conditional update, so a test can line racers up in that window.
	afterRead func()
}

// NewStore returns a store over db, which must have Migrations applied.
func NewStore(db *gorm.DB) *Store {
	return &Store{db: db, now: func() time.Time { return time.Now().UTC() }}
}

// SetClock replaces the store's clock; tests use it to age records.
func (s *Store) SetClock(now func() time.Time) { s.now = now }

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Claim tries to own (scope, key) for a request with fingerprint fp. The claim
// is an INSERT that the unique key lets through once, or a conditional UPDATE
// that takes over a row whose lock or retention ran out; never a read followed
// by a write. lockTTL is how long the claim blocks others; retention how long
// the record is kept. With readFirst (the entry layer has seen the key) the
// row is read before any insert is tried, which spares the database a
// duplicate-key error per duplicate.
func (s *Store) Claim(ctx context.Context, scope, key, fp string, lockTTL, retention time.Duration, readFirst bool) (ClaimResult, error) {
	for attempt := range maxClaimAttempts {
		now := s.now()
		owner := newOwner()
		claim := &Claim{Scope: scope, Key: key, Fingerprint: fp, owner: owner}
		if !readFirst || attempt > 0 {
			res, err := execSQL(ctx, s.db, `INSERT INTO idempotency_record
				(scope, idem_key, fingerprint, status, owner, locked_until, expire_time, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				scope, key, fp, StatusProcessing, owner, now.Add(lockTTL), now.Add(retention), now, now)
			if err == nil {
				id, err := res.LastInsertId()
				if err != nil {
					return ClaimResult{}, fmt.Errorf("idempotency: claim %q: %w", key, err)
				}
				claim.id = uint64(id)
				return ClaimResult{Outcome: Claimed, Claim: claim}, nil
			}
			if !database.IsDuplicateKey(err) {
				return ClaimResult{}, fmt.Errorf("idempotency: claim %q: %w", key, err)
			}
		}
		rec, err := s.Get(ctx, scope, key)
		if errors.Is(err, gorm.ErrRecordNotFound) {
			continue // released or archived meanwhile: insert again
		}
		if err != nil {
			return ClaimResult{}, err
		}
		if s.afterRead != nil {
			s.afterRead()
		}
		if res, decided := decide(rec, fp, now); decided {
			return res, nil
		}
		// Past retention but not archived yet: the key is forgotten, and the
		// next request may reuse it whatever its body. Or the holder's lock
		// ran out (it crashed or hangs). Either way, take the row over.
		cond, args := "expire_time <= ?", []any{now}
		if rec.ExpireTime.After(now) {
			cond, args = "status = ? AND locked_until <= ?", []any{StatusProcessing, now}
		}
		ok, err := s.takeOver(ctx, rec, claim, now, lockTTL, retention, cond, args...)
		if err != nil {
			return ClaimResult{}, err
		}
		if ok {
			return ClaimResult{Outcome: Claimed, Claim: claim}, nil
		}
		// Someone else changed the row between our read and our update.
	}
	return ClaimResult{}, fmt.Errorf("idempotency: claim %q: still contended after %d attempts", key, maxClaimAttempts)
}

// takeOver moves the row to a new PROCESSING claim if it is still the row we
// read (same owner) and cond still holds. Of concurrent take-overs one wins:
// the others find the owner changed and affect no row.
func (s *Store) takeOver(ctx context.Context, rec *Record, c *Claim, now time.Time, lockTTL, retention time.Duration, cond string, args ...any) (bool, error) {
	q := `UPDATE idempotency_record SET fingerprint = ?, status = ?, owner = ?,
		response_status = NULL, response_headers = NULL, response_body = NULL,
		locked_until = ?, expire_time = ?, updated_at = ?
		WHERE id = ? AND owner = ? AND ` + cond
	all := append([]any{c.Fingerprint, StatusProcessing, c.owner, now.Add(lockTTL), now.Add(retention), now,
		rec.ID, rec.Owner}, args...)
	n, err := execAffected(ctx, s.db, q, all...)
	if err != nil {
		return false, fmt.Errorf("idempotency: take over %q: %w", rec.Key, err)
	}
	c.id = rec.ID
	return n == 1, nil
}

// ClaimCompleted claims (scope, key) and stores resp as its outcome in the
// same statement, through tx: the handler's business transaction (nil: the
// store's own database, one autocommitted statement). It is the claim of
// Middleware.HandlerInTx, made last in the business transaction, so a
// guarded request costs that transaction one insert and no commit of its
// own.
//
// The unique key decides as in Claim: of concurrent transactions inserting
// one key, the first to insert goes on, and the others wait on its
// uncommitted row. When it commits they fail with a duplicate key, read the
// committed record with a shared lock (a locking read sees the latest
// commit, not the transaction's snapshot; shared, so the waiters do not
// deadlock each other) and answer Replay, Mismatch or InProgress. When it
// rolls back, the first waiter's insert goes through.
//
// A record past its retention, or a PROCESSING claim whose lock ran out
// (left by Handler on the same route before a deployment switched it), is
// not taken over here: every waiter holds a shared lock on it, and two of
// them upgrading to write it would deadlock. The answer is InProgress with
// Stale set; the caller rolls back, clears the record with ClearStale and
// asks the client to retry.
//
// InnoDB can still pick one of the concurrent inserts as a deadlock victim:
// right after a stale record of the key was deleted, its delete-marked index
// entry makes the waiters lock a gap as well as the row, and two of them can
// wait on each other. The victim's transaction is already rolled back, and
// another request is inserting the key, so the answer is InProgress: a 409
// the client retries, never a 500.
func (s *Store) ClaimCompleted(ctx context.Context, tx *gorm.DB, scope, key, fp string, resp Response, retention time.Duration) (ClaimResult, error) {
	if tx == nil {
		tx = s.db
	}
	enc, err := encode(resp)
	if err != nil {
		return ClaimResult{}, err
	}
	for range maxClaimAttempts {
		now := s.now()
		owner := newOwner()
		res, err := execSQL(ctx, tx, `INSERT INTO idempotency_record
			(scope, idem_key, fingerprint, status, owner, response_status, response_headers, response_body,
			 locked_until, expire_time, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			scope, key, fp, enc.recordStatus, owner, enc.status, enc.headers, enc.body,
			now, now.Add(retention), now, now)
		if err == nil {
			id, err := res.LastInsertId()
			if err != nil {
				return ClaimResult{}, fmt.Errorf("idempotency: claim %q: %w", key, err)
			}
			return ClaimResult{Outcome: Claimed, Claim: &Claim{Scope: scope, Key: key, Fingerprint: fp, id: uint64(id), owner: owner}}, nil
		}
		var rec *Record
		if database.IsDuplicateKey(err) {
			rec, err = s.get(ctx, tx, scope, key, true)
			if errors.Is(err, gorm.ErrRecordNotFound) {
				continue // released or archived meanwhile: insert again
			}
		}
		if database.IsDeadlock(err) {
			return ClaimResult{Outcome: InProgress, Deadlocked: true}, nil
		}
		if err != nil {
			return ClaimResult{}, fmt.Errorf("idempotency: claim %q: %w", key, err)
		}
		if res, decided := decide(rec, fp, now); decided {
			return res, nil
		}
		return ClaimResult{Outcome: InProgress, Record: rec, Stale: true}, nil
	}
	return ClaimResult{}, fmt.Errorf("idempotency: claim %q: still contended after %d attempts", key, maxClaimAttempts)
}

// decide answers a request from a committed record, or reports false when
// the record no longer holds the key: it is past its retention, or a
// PROCESSING claim whose lock ran out.
func decide(rec *Record, fp string, now time.Time) (ClaimResult, bool) {
	switch {
	case !rec.ExpireTime.After(now):
		return ClaimResult{}, false
	case rec.Fingerprint != fp:
		return ClaimResult{Outcome: Mismatch}, true
	case rec.Status != StatusProcessing:
		return ClaimResult{Outcome: Replay, Record: rec}, true
	case rec.LockedUntil.After(now):
		return ClaimResult{Outcome: InProgress, Wait: rec.LockedUntil.Sub(now)}, true
	}
	return ClaimResult{}, false
}

// ClearStale deletes rec if it is still the row that was read and still
// past its retention or an expired PROCESSING claim, so the key's next
// request can claim it with an insert. It reports whether it deleted it.
func (s *Store) ClearStale(ctx context.Context, rec *Record) (bool, error) {
	now := s.now()
	n, err := execAffected(ctx, s.db, `DELETE FROM idempotency_record
		WHERE id = ? AND owner = ? AND (expire_time <= ? OR (status = ? AND locked_until <= ?))`,
		rec.ID, rec.Owner, now, StatusProcessing, now)
	if err != nil {
		return false, fmt.Errorf("idempotency: clear stale %q: %w", rec.Key, err)
	}
	return n == 1, nil
}

// Get reads the record of (scope, key); gorm.ErrRecordNotFound when absent.
func (s *Store) Get(ctx context.Context, scope, key string) (*Record, error) {
	return s.get(ctx, s.db, scope, key, false)
}

// get reads through db; with lock it is a locking read (LOCK IN SHARE
// MODE), which in a transaction sees the latest committed row rather than
// the transaction's snapshot.
func (s *Store) get(ctx context.Context, db *gorm.DB, scope, key string, lock bool) (*Record, error) {
	q := `SELECT id, scope, idem_key, fingerprint, status, owner,
		response_status, response_headers, response_body, locked_until, expire_time
		FROM idempotency_record WHERE scope = ? AND idem_key = ?`
	if lock {
		q += " LOCK IN SHARE MODE"
	}
	var (
		rec     Record
		status  sql.NullInt32
		headers sql.NullString
		body    []byte
	)
	err := db.Statement.ConnPool.QueryRowContext(ctx, q, scope, key).Scan(
		&rec.ID, &rec.Scope, &rec.Key, &rec.Fingerprint, &rec.Status, &rec.Owner,
		&status, &headers, &body, &rec.LockedUntil, &rec.ExpireTime)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, gorm.ErrRecordNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: read %q: %w", key, err)
	}
	if status.Valid {
		rec.Response.Status = int(status.Int32)
		rec.Response.Body = body
		if rec.Response.Body == nil {
			rec.Response.Body = []byte{}
		}
		if headers.String != "" {
			if err := json.Unmarshal([]byte(headers.String), &rec.Response.Header); err != nil {
				return nil, fmt.Errorf("idempotency: record %q headers: %w", key, err)
			}
		}
	}
	return &rec, nil
}

// execSQL runs a statement straight on db's pool or transaction. These
// statements are on every guarded request's path; skipping gorm's callback
// chain keeps their cost at the driver's.
func execSQL(ctx context.Context, db *gorm.DB, q string, args ...any) (sql.Result, error) {
	return db.Statement.ConnPool.ExecContext(ctx, q, args...)
}

func execAffected(ctx context.Context, db *gorm.DB, q string, args ...any) (int64, error) {
	res, err := execSQL(ctx, db, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Complete stores resp as the outcome of claim, through tx: the caller's
// business transaction, or the store's own database for a handler without
// one. The update is conditional on the claim still being ours and still
// PROCESSING; ErrClaimLost otherwise, and the business transaction must then
// roll back. The record is kept for retention from now.
func (s *Store) Complete(ctx context.Context, tx *gorm.DB, c *Claim, resp Response, retention time.Duration) error {
	if tx == nil {
		tx = s.db
	}
	enc, err := encode(resp)
	if err != nil {
		return err
	}
	now := s.now()
	n, err := execAffected(ctx, tx, `UPDATE idempotency_record SET status = ?, response_status = ?,
		response_headers = ?, response_body = ?, expire_time = ?, updated_at = ?
		WHERE id = ? AND owner = ? AND status = ?`,
		enc.recordStatus, enc.status, enc.headers, enc.body, now.Add(retention), now,
		c.id, c.owner, StatusProcessing)
	if err != nil {
		return fmt.Errorf("idempotency: complete %q: %w", c.Key, err)
	}
	if n != 1 {
		return ErrClaimLost
	}
	return nil
}

// encodedResponse is a Response as the table stores it.
type encodedResponse struct {
	recordStatus string // SUCCEEDED or FAILED
	status       int
	headers      string
	body         []byte
}

func encode(resp Response) (encodedResponse, error) {
	e := encodedResponse{recordStatus: StatusSucceeded, status: resp.Status, body: resp.Body}
	if resp.Status >= 400 {
		e.recordStatus = StatusFailed
	}
	if len(resp.Header) > 0 {
		h, err := json.Marshal(resp.Header)
		if err != nil {
			return encodedResponse{}, fmt.Errorf("idempotency: encode headers: %w", err)
		}
		e.headers = string(h)
	}
	if e.body == nil {
		e.body = []byte{}
	}
	return e, nil
}

// Release gives the key back after a transient failure, so a retry runs the
// handler again. It deletes the row only while it is still this claim's and
// still PROCESSING: a completion that did commit (the handler's transaction
// committed but its caller saw an error) is kept and will be replayed. It
// reports whether a row was deleted.
func (s *Store) Release(ctx context.Context, c *Claim) (bool, error) {
	n, err := execAffected(ctx, s.db, `DELETE FROM idempotency_record
		WHERE id = ? AND owner = ? AND status = ?`, c.id, c.owner, StatusProcessing)
	if err != nil {
		return false, fmt.Errorf("idempotency: release %q: %w", c.Key, err)
	}
	return n == 1, nil
}

// DeleteExpired deletes at most limit records whose expire_time passed before
// now, oldest first, and returns how many it deleted. Small batches keep each
// statement's locks and undo log short on a busy table.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time, limit int) (int64, error) {
	n, err := execAffected(ctx, s.db, `DELETE FROM idempotency_record
		WHERE expire_time <= ? ORDER BY expire_time LIMIT ?`, now, limit)
	if err != nil {
		return 0, fmt.Errorf("idempotency: delete expired: %w", err)
	}
	return n, nil
}
