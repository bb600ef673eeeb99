package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// createPaymentRequest is the body of POST /payments. The amount is never
// the client's: it is the order's pay_amount.
type createPaymentRequest struct {
	OrderNo string `json:"order_no"`
}

// paymentResponse is a payment as the API shows it.
type paymentResponse struct {
	OutTradeNo     string     `json:"out_trade_no"`
	OrderNo        string     `json:"order_no"`
	Amount         int64      `json:"amount"`
	Status         string     `json:"status"`
	Channel        string     `json:"channel,omitempty"`
	PlatformSerial string     `json:"platform_serial,omitempty"`
	PaidAt         *time.Time `json:"paid_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
}

func toPaymentResponse(p payment.Payment) paymentResponse {
	return paymentResponse{
		OutTradeNo: p.OutTradeNo, OrderNo: p.OrderNo, Amount: p.Amount, Status: string(p.Status),
		Channel: p.Channel, PlatformSerial: p.PlatformSerial, PaidAt: p.PaidAt, CreatedAt: p.CreatedAt,
	}
}

// createPayment answers 201 with a new payment, or 200 with the order's
// existing one.
func (api *API) createPayment(c *gin.Context) {
	var req createPaymentRequest
	if !httpserver.DecodeJSON(c, &req) {
		return
	}
	if req.OrderNo == "" || len(req.OrderNo) > 64 {
		problem.Abort(c, http.StatusBadRequest, "order_no is required (at most 64 characters)")
		return
	}
	p, created, err := api.app.CreatePayment(c.Request.Context(), userID(c), req.OrderNo)
	if err != nil {
		api.writeError(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, toPaymentResponse(p))
}

func (api *API) getPayment(c *gin.Context) {
	p, err := api.app.GetPayment(c.Request.Context(), userID(c), c.Param("no"))
	if err != nil {
		api.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, toPaymentResponse(p))
}

// closeResponse is the answer of POST /internal/orders/:no/close.
type closeResponse struct {
	OrderNo string `json:"order_no"`
	Outcome string `json:"outcome"` // closed or paid
}

// closeOrder serves POST /internal/orders/:no/close, which the order
// service calls before it closes an unpaid order. It reads no body.
func (api *API) closeOrder(c *gin.Context) {
	no := c.Param("no")
	if no == "" || len(no) > 64 {
		problem.Abort(c, http.StatusBadRequest, "the order number must have 1 to 64 characters")
		return
	}
	out, err := api.app.CloseOrderPayment(c.Request.Context(), no)
	if err != nil {
		api.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, closeResponse{OrderNo: no, Outcome: string(out)})
}

func (api *API) reconcile(c *gin.Context) {
	rep, err := api.app.Reconcile(c.Request.Context())
	if err != nil {
		api.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"empty": rep.Empty(), "report": rep})
}
