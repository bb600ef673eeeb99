package order

// ChargeOutcome is the payment service's answer when the order service asks
// it to close an order's charge before closing the order.
type ChargeOutcome string

// Outcomes of closing a charge.
const (
	// ChargeClosed: no payment can land for the order any more (its charge
	// was closed at the platform, or it never had one); the order may be
	// cancelled.
	ChargeClosed ChargeOutcome = "closed"
	// ChargePaid: the customer paid; the payment service applied it and its
	// payment.succeeded is on the way. The order must not be cancelled.
	ChargePaid ChargeOutcome = "paid"
)
