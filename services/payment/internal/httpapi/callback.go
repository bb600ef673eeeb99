package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/psp"
)

// callbackAnswer is the body of a 2xx answer to the platform.
type callbackAnswer struct {
	Result  string `json:"result"`  // always "SUCCESS": the platform stops retrying
	Outcome string `json:"outcome"` // processed or duplicate
}

type applyFunc func(ctx context.Context, t payment.Transaction) (payment.Outcome, error)

// handleCallback verifies a notification and hands it to apply. Both
// handler modes share this edge (signature, timestamp window, parsing), so
// the broken and the fixed variants differ only in how they apply it.
func (h *handlers) handleCallback(mode string, apply applyFunc) gin.HandlerFunc {
	count := func(outcome string) { h.metrics.callbacks.WithLabelValues(mode, outcome).Inc() }
	return func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			count("malformed")
			if httpserver.IsBodyTooLarge(err) {
				problem.Abort(c, http.StatusRequestEntityTooLarge, "notification too large")
				return
			}
			problem.Abort(c, http.StatusBadRequest, "cannot read the notification")
			return
		}
		if err := psp.Verify(c.Request.Header, body, h.opts.Secret, h.opts.Now(), h.opts.SignatureWindow); err != nil {
			outcome := "bad_signature"
			if errors.Is(err, psp.ErrStale) {
				outcome = "stale_timestamp"
			}
			count(outcome)
			h.opts.Log.WarnContext(c.Request.Context(), "payment notification refused", "reason", outcome)
			problem.Abort(c, http.StatusUnauthorized, err.Error())
			return
		}
		t, err := parseNotification(body)
		if err != nil {
			count("malformed")
			problem.Abort(c, http.StatusBadRequest, err.Error())
			return
		}
		outcome, err := apply(c.Request.Context(), t)
		if err != nil {
			count(callbackOutcome(err))
			h.writeError(c, err)
			return
		}
		count(string(outcome))
		c.JSON(http.StatusOK, callbackAnswer{Result: "SUCCESS", Outcome: string(outcome)})
	}
}

// parseNotification decodes and checks a verified notification body.
func parseNotification(body []byte) (payment.Transaction, error) {
	var n psp.Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return payment.Transaction{}, errors.New("notification is not valid JSON")
	}
	switch {
	case n.Channel != psp.Channel:
		return payment.Transaction{}, errors.New("unknown channel")
	case n.PlatformSerial == "" || len(n.PlatformSerial) > 64:
		return payment.Transaction{}, errors.New("platform_serial is required (at most 64 characters)")
	case n.OutTradeNo == "" || len(n.OutTradeNo) > 64:
		return payment.Transaction{}, errors.New("out_trade_no is required (at most 64 characters)")
	case n.Amount <= 0:
		return payment.Transaction{}, errors.New("amount must be positive")
	case n.TradeStatus != psp.TradeSuccess:
		return payment.Transaction{}, errors.New("trade_status must be SUCCESS")
	case n.PaidAt.IsZero():
		return payment.Transaction{}, errors.New("paid_at is required")
	}
	return payment.Transaction{
		Channel: n.Channel, PlatformSerial: n.PlatformSerial, OutTradeNo: n.OutTradeNo,
		Amount: n.Amount, PaidAt: n.PaidAt.UTC(),
	}, nil
}

func callbackOutcome(err error) string {
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return "unknown_payment"
	case errors.Is(err, payment.ErrAmountMismatch):
		return "amount_mismatch"
	case errors.Is(err, payment.ErrConflict):
		return "conflict"
	case errors.Is(err, errBusy):
		return "locked"
	}
	return "error"
}
