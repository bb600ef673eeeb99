package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
)

// Redrive puts failed rows back to pending with a fresh retry budget: the
// rows named by ids, or every failed row when ids is empty. It returns how
// many rows it changed. A redriven message may already be in the stream (its
// last attempt may have been stored without a PubAck arriving), possibly
// outside the duplicate window: consumers dedup it by id.
func Redrive(ctx context.Context, db *gorm.DB, ids ...string) (int64, error) {
	now := time.Now().UTC()
	q := db.WithContext(ctx).Table("local_message").Where("status = ?", StatusFailed)
	if len(ids) > 0 {
		q = q.Where("message_no IN ?", ids)
	}
	res := q.Updates(map[string]any{"status": StatusPending, "retry_count": 0, "next_retry_time": now, "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("outbox redrive: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// Redrive is the package Redrive on the relay's database, followed by a
// poll: a redriven row is due at once (it was written since Add, so no
// hand-off applies to it).
func (r *Relay) Redrive(ctx context.Context, ids ...string) (int64, error) {
	n, err := Redrive(ctx, r.db, ids...)
	if err != nil {
		return 0, err
	}
	r.m.redriven.Add(float64(n))
	r.log.Info("outbox redrive", "redriven", n, "ids", ids)
	r.pollNow()
	return n, nil
}

// RedriveRequest is the optional body of the redrive endpoint.
type RedriveRequest struct {
	// MessageIDs names the rows to redrive; empty redrives every failed row.
	MessageIDs []string `json:"message_ids"`
}

// RedriveResponse answers the redrive endpoint.
type RedriveResponse struct {
	Redriven int64 `json:"redriven"`
}

// RedrivePath is where every service serves RedriveHandler.
const RedrivePath = "/admin/outbox/redrive"

// MountRedrive serves RedriveHandler at POST RedrivePath on routes, behind
// httpserver.AdminAuth with adminToken: every service's redrive endpoint.
func (r *Relay) MountRedrive(routes gin.IRoutes, adminToken string) {
	routes.POST(RedrivePath, httpserver.AdminAuth(adminToken), r.RedriveHandler())
}

// RedriveHandler serves POST /admin/outbox/redrive. Mount it behind
// httpserver.AdminAuth (MountRedrive does): it changes state.
func (r *Relay) RedriveHandler() gin.HandlerFunc {
	return func(c *gin.Context) {
		var req RedriveRequest
		if err := c.ShouldBindJSON(&req); err != nil && !errors.Is(err, io.EOF) {
			problem.Abort(c, http.StatusBadRequest, "body must be empty or {\"message_ids\": [...]}: "+err.Error())
			return
		}
		n, err := r.Redrive(c.Request.Context(), req.MessageIDs...)
		if err != nil {
			r.log.Error("outbox redrive failed", "err", err)
			problem.Abort(c, http.StatusInternalServerError, "redrive failed")
			return
		}
		c.JSON(http.StatusOK, RedriveResponse{Redriven: n})
	}
}

// Statistics describes local_message at one moment.
type Statistics struct {
	Pending          int64
	Failed           int64
	OldestPendingAge time.Duration
}

// Stats counts pending and failed rows (index range scans on status) and
// measures the age of the oldest pending row.
func Stats(ctx context.Context, db *gorm.DB) (Statistics, error) {
	var st Statistics
	var oldest sql.NullTime
	row := db.WithContext(ctx).Raw(`SELECT
  (SELECT COUNT(*) FROM local_message WHERE status = 'pending'),
  (SELECT COUNT(*) FROM local_message WHERE status = 'failed'),
  (SELECT MIN(created_at) FROM local_message WHERE status = 'pending')`).Row()
	if err := row.Scan(&st.Pending, &st.Failed, &oldest); err != nil {
		return st, fmt.Errorf("outbox stats: %w", err)
	}
	if oldest.Valid {
		st.OldestPendingAge = max(0, time.Since(oldest.Time))
	}
	return st, nil
}
