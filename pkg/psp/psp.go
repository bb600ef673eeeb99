// Package psp is the contract between the payment service and the payment
// platform (PSP): the charge, close, query and refund requests, the
// asynchronous "paid" and "refunded" notifications, their signature and the
// answers the platform understands. Both sides import it: the simulator
// (pspsim) signs with it and the payment service verifies with it, so the
// two can never drift apart. It holds only what a real platform's
// integration has: the simulator's lab knobs (storms, replays, bad
// signatures, held notifications) are the simulator's own, in pspsim.
//
// # Notification contract
//
// The platform POSTs the JSON body of a Notification (a charge was paid) or
// of a RefundNotification (a refund was made) to the merchant's notify URL
// with three headers:
//
//	X-PSP-Timestamp  Unix seconds when this delivery attempt was signed
//	X-PSP-Nonce      random hex, fresh for every attempt
//	X-PSP-Signature  lowercase hex HMAC-SHA256(secret, timestamp + "\n" + nonce + "\n" + body)
//
// The merchant answers 2xx when the notification is processed or was already
// processed (a duplicate); the platform then stops. Any other status, or no
// answer within its timeout, makes the platform deliver the same
// notification again on its retry schedule, re-signed with a new timestamp and
// nonce, until the schedule is exhausted.
//
// # Charges at the platform
//
// A charge is keyed by the merchant's out_trade_no: charging it again returns
// the same transaction. Its status is WAIT_PAY (the customer has not paid),
// PAID or CLOSED. Closing it answers "closed" (nothing can be paid on it any
// more, also when the platform never saw it) or "paid" with the transaction,
// when the customer paid first. A refund is keyed by the merchant's
// refund_no: asking again with the same number returns the same refund and
// never makes a second one.
package psp

import (
	"time"
)

// Header names of a signed notification.
const (
	HeaderTimestamp = "X-PSP-Timestamp"
	HeaderNonce     = "X-PSP-Nonce"
	HeaderSignature = "X-PSP-Signature"
)

// Channel is the name under which the simulated platform's transactions are
// recorded; a real deployment would add one per platform.
const Channel = "pspsim"

// TradeSuccess is the only trade status the platform notifies about, and the
// only refund status.
const TradeSuccess = "SUCCESS"

// Statuses of a charge at the platform (Trade.Status).
const (
	StatusWaitPay = "WAIT_PAY"
	StatusPaid    = "PAID"
	StatusClosed  = "CLOSED"
)

// Answers to a close (CloseResponse.Status).
const (
	CloseClosed = "closed" // nothing can be paid on the charge any more
	ClosePaid   = "paid"   // the customer paid first: the transaction is in the answer
)

// Notification is the body of a "paid" notification.
type Notification struct {
	// Channel names the platform that sent it.
	Channel string `json:"channel"`
	// PlatformSerial is the platform's own transaction number; together with
	// Channel it identifies one payment on the platform side.
	PlatformSerial string `json:"platform_serial"`
	// OutTradeNo is the merchant's payment number, as sent with the charge.
	OutTradeNo string `json:"out_trade_no"`
	// Amount is what the platform collected, in cents.
	Amount int64 `json:"amount"`
	// TradeStatus is always TradeSuccess for now.
	TradeStatus string    `json:"trade_status"`
	PaidAt      time.Time `json:"paid_at"`
}

// ChargeRequest asks the platform to collect Amount for OutTradeNo.
type ChargeRequest struct {
	OutTradeNo string `json:"out_trade_no"`
	Amount     int64  `json:"amount"`
	// NotifyURL overrides the platform's default notification address.
	NotifyURL string `json:"notify_url,omitempty"`
}

// ChargeResponse is the platform's synchronous answer to a charge.
type ChargeResponse struct {
	PlatformSerial string `json:"platform_serial"`
	OutTradeNo     string `json:"out_trade_no"`
	Amount         int64  `json:"amount"`
}

// Trade is what the platform knows about one out_trade_no: the answer to a
// query (GET /charges?out_trade_no=). The transaction fields are set once
// the charge is paid.
type Trade struct {
	OutTradeNo     string     `json:"out_trade_no"`
	Status         string     `json:"status"` // StatusWaitPay, StatusPaid or StatusClosed
	Channel        string     `json:"channel,omitempty"`
	PlatformSerial string     `json:"platform_serial,omitempty"`
	Amount         int64      `json:"amount,omitempty"`
	PaidAt         *time.Time `json:"paid_at,omitempty"`
}

// Paid reports whether the trade was paid, with the transaction that paid it.
func (t Trade) Paid() bool {
	return t.Status == StatusPaid && t.PlatformSerial != "" && t.PaidAt != nil
}

// CloseResponse is the answer to a close (POST /charges/{out_trade_no}/close):
// Status CloseClosed, or ClosePaid with the transaction that paid the charge.
type CloseResponse struct {
	Status         string     `json:"status"`
	OutTradeNo     string     `json:"out_trade_no"`
	Channel        string     `json:"channel,omitempty"`
	PlatformSerial string     `json:"platform_serial,omitempty"`
	Amount         int64      `json:"amount,omitempty"`
	PaidAt         *time.Time `json:"paid_at,omitempty"`
}

// RefundRequest asks the platform to give Amount of OutTradeNo's payment
// back, under the merchant's RefundNo: a repeat of the same RefundNo returns
// the first refund.
type RefundRequest struct {
	RefundNo   string `json:"refund_no"`
	OutTradeNo string `json:"out_trade_no"`
	Amount     int64  `json:"amount"`
	// NotifyURL overrides the platform's default refund notification address.
	NotifyURL string `json:"notify_url,omitempty"`
}

// RefundResponse is the platform's synchronous answer to a refund request:
// accepted, with the platform's refund serial. The outcome comes later, as a
// RefundNotification.
type RefundResponse struct {
	RefundNo     string `json:"refund_no"`
	RefundSerial string `json:"refund_serial"`
	OutTradeNo   string `json:"out_trade_no"`
	Amount       int64  `json:"amount"`
}

// RefundNotification is the body of a "refunded" notification.
type RefundNotification struct {
	Channel string `json:"channel"`
	// RefundSerial is the platform's number of the refund.
	RefundSerial string `json:"refund_serial"`
	// RefundNo is the merchant's refund number, as sent with the request.
	RefundNo   string `json:"refund_no"`
	OutTradeNo string `json:"out_trade_no"`
	// Amount is what was given back, in cents.
	Amount int64 `json:"amount"`
	// RefundStatus is always TradeSuccess for now.
	RefundStatus string    `json:"refund_status"`
	RefundedAt   time.Time `json:"refunded_at"`
}
