package config

import (
	"errors"

	"github.com/oncemall/oncemall/pkg/events"
)

// Events names the JetStream streams and the subject prefix of the events
// the order service publishes (order.created, order.paid) and consumes
// (payment.succeeded). Production keeps the defaults; the end-to-end test
// sets unique values so that its processes never share a stream or a
// durable consumer with services already running on the same NATS.
type Events struct {
	OrderStream   string `env:"ORDER_STREAM" default:"ORDER" usage:"JetStream stream the order service publishes order.created and order.paid to (declared if missing)"`
	PaymentStream string `env:"PAYMENT_STREAM" default:"PAYMENT" usage:"JetStream stream carrying payment.succeeded (declared if missing)"`
	SubjectPrefix string `env:"EVENT_SUBJECT_PREFIX" default:"" usage:"put before every order.* and payment.* subject, ending in a dot; empty in production, tests set a unique one"`
}

// Validate reports unusable stream names or prefix.
func (e Events) Validate() error {
	return errors.Join(
		events.CheckStreamName("ORDER_STREAM", e.OrderStream),
		events.CheckStreamName("PAYMENT_STREAM", e.PaymentStream),
		events.CheckSubjectPrefix("EVENT_SUBJECT_PREFIX", e.SubjectPrefix),
	)
}
