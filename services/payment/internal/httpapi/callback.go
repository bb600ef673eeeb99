package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// callbackAnswer is the body of a 2xx answer to the platform.
type callbackAnswer struct {
	Result  string `json:"result"`  // always "SUCCESS": the platform stops retrying
	Outcome string `json:"outcome"` // processed, duplicate or refunding
}

// callback verifies a notification and hands it to the one callback use
// case, which applies it with the handler the configuration chose (the fix,
// or in the lab the broken variant); this edge (signature, timestamp
// window, parsing) is the same for both.
func (api *API) callback(c *gin.Context) {
	handler := string(api.app.CallbackMode())
	count := func(outcome string) {
		api.callbacks.WithLabelValues(handler, outcome).Inc()
		markSpan(c, outcome)
	}
	body, ok := readNotification(c, count)
	if !ok {
		return
	}
	if err := psp.Verify(c.Request.Header, body, api.opts.Secret, api.opts.Now(), api.opts.SignatureWindow); err != nil {
		api.refuseUnsigned(c, count, "payment notification refused", err)
		return
	}
	t, err := parseNotification(body)
	if err != nil {
		count("malformed")
		problem.Abort(c, http.StatusBadRequest, err.Error())
		return
	}
	outcome, err := api.app.HandlePaid(c.Request.Context(), t)
	api.answerNotification(c, count, string(outcome), err)
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

// refundCallback verifies a refund notification (psp.VerifyRefund:
// signature in constant time, then the timestamp window, then the body) and
// hands it to HandleRefunded. Its answers follow the paid notification's: 2xx
// for processed and duplicate (the platform stops), 401 bad signature or
// stale, 400 malformed, 404 unknown refund, 409 conflict, 422 mismatch; none
// of the refusals writes anything.
func (api *API) refundCallback(c *gin.Context) {
	count := func(outcome string) {
		api.refundCallbacks.WithLabelValues(outcome).Inc()
		markSpan(c, outcome)
	}
	body, ok := readNotification(c, count)
	if !ok {
		return
	}
	n, err := psp.VerifyRefund(c.Request.Header, body, api.opts.Secret, api.opts.Now(), api.opts.SignatureWindow)
	switch {
	case errors.Is(err, psp.ErrMalformed):
		count("malformed")
		problem.Abort(c, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		api.refuseUnsigned(c, count, "refund notification refused", err)
		return
	}
	outcome, err := api.app.HandleRefunded(c.Request.Context(), payment.RefundResult{
		Channel: n.Channel, RefundSerial: n.RefundSerial, RefundNo: n.RefundNo, OutTradeNo: n.OutTradeNo,
		Amount: n.Amount, RefundedAt: n.RefundedAt.UTC(),
	})
	api.answerNotification(c, count, string(outcome), err)
}

// readNotification reads a notification's body; one it cannot read is
// counted malformed and answered 413 or 400, and ok is false.
func readNotification(c *gin.Context, count func(outcome string)) (body []byte, ok bool) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		count("malformed")
		if httpserver.IsBodyTooLarge(err) {
			problem.Abort(c, http.StatusRequestEntityTooLarge, "notification too large")
			return nil, false
		}
		problem.Abort(c, http.StatusBadRequest, "cannot read the notification")
		return nil, false
	}
	return body, true
}

// refuseUnsigned counts, logs as msg and answers 401 a notification whose
// signature (bad_signature) or timestamp (stale_timestamp) err refused.
func (api *API) refuseUnsigned(c *gin.Context, count func(outcome string), msg string, err error) {
	outcome := "bad_signature"
	if errors.Is(err, psp.ErrStale) {
		outcome = "stale_timestamp"
	}
	count(outcome)
	api.opts.Log.WarnContext(c.Request.Context(), msg, "reason", outcome)
	problem.Abort(c, http.StatusUnauthorized, err.Error())
}

// answerNotification counts a handled notification's outcome and answers
// it: 200 SUCCESS, which stops the platform's retries, or err's status.
func (api *API) answerNotification(c *gin.Context, count func(outcome string), outcome string, err error) {
	if err != nil {
		count(callbackOutcome(err))
		api.writeError(c, err)
		return
	}
	count(outcome)
	c.JSON(http.StatusOK, callbackAnswer{Result: "SUCCESS", Outcome: outcome})
}

// markSpan puts a notification's outcome (the label of its counter) on the
// request's span, and duplicate=true on a copy the service had processed
// already, so a storm in a trace shows which copies did the work. Without
// tracing the span does not record and nothing is done.
func markSpan(c *gin.Context, outcome string) {
	span := trace.SpanFromContext(c.Request.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(tracing.OutcomeKey.String(outcome), tracing.DuplicateKey.Bool(outcome == string(payment.Duplicate)))
}
