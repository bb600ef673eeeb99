// Package inbox consumes JetStream messages exactly once in effect: each
// message is handled inside a database transaction that also records
// (consumer, message id) in processed_message under a unique key, so a
// redelivered or republished message is acknowledged without a second effect.
//
// CONTRACT (fixed by the foundation; the outbox issue implements it and may
// add to it, never change it): Message, Handler, Permanent, Migrations,
// Config, NewConsumer, (*Consumer).Run.
package inbox

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/migrate"
)

var errNotImplemented = errors.New("inbox: not implemented yet")

// Message is one delivered event.
type Message struct {
	ID        string // Nats-Msg-Id, the outbox message number
	Subject   string
	Body      []byte
	Headers   map[string]string
	Delivered uint64 // delivery attempt, from 1
}

// Handler applies a message's business effect inside tx. Returning nil
// commits the effect together with the processed-message row; returning an
// error rolls both back and the message is redelivered later, unless the
// error is Permanent.
type Handler func(ctx context.Context, tx *gorm.DB, msg Message) error

// Permanent wraps err to say that redelivery cannot help (malformed payload,
// business rule refusal): the message is terminated and recorded as dead.
func Permanent(err error) error { return err }

// Migrations creates processed_message and dead_message.
var Migrations = migrate.Source{Name: "inbox"}

// Config tunes a Consumer.
type Config struct {
	Name           string   // durable consumer name, also the dedup scope
	Stream         string   // stream to consume
	FilterSubjects []string // subjects within the stream
	Workers        int
	MaxDeliver     int
	AckWait        time.Duration
}

// Consumer is a durable JetStream consumer with a worker pool.
type Consumer struct{}

// NewConsumer declares the durable consumer and returns it.
func NewConsumer(db *gorm.DB, js jetstream.JetStream, cfg Config, h Handler, log *slog.Logger, reg prometheus.Registerer) (*Consumer, error) {
	return nil, errNotImplemented
}

// Run consumes until ctx ends, then lets in-flight handlers finish.
func (c *Consumer) Run(ctx context.Context) error { return errNotImplemented }
