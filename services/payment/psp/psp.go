// Package psp is the contract between the payment service and the payment
// platform (PSP): the charge request, the asynchronous "paid" notification,
// its signature and the answers the platform understands. Both sides import
// it: the simulator (pspsim) signs with it and the payment service verifies
// with it, so the two can never drift apart. It holds only what a real
// platform's integration has: the simulator's lab knobs (storms, replays,
// bad signatures) are the simulator's own, in pspsim.
//
// # Notification contract
//
// The platform POSTs the JSON body of a Notification to the merchant's notify
// URL with three headers:
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

// TradeSuccess is the only trade status the platform notifies about.
const TradeSuccess = "SUCCESS"

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
