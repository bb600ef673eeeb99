package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
)

// Send hands committed outbox messages to the relay (outbox.Relay.Send),
// which publishes them at once; what it cannot publish the relay's poll
// does.
type Send func(msgs ...outbox.Message)

// txBase is what a transaction of either store shares: the gorm transaction
// and the events it wrote to the outbox.
type txBase struct {
	db *gorm.DB
	// msgs are the messages AddEvent wrote, as outbox.Add filled them in.
	msgs []outbox.Message
	// onFirstEvent, when set, runs at the first AddEvent: a transaction
	// owned by the inbox registers the send there (see inboxBase).
	onFirstEvent func()
}

// AddEvent writes e to the outbox (local_message) in the transaction.
func (t *txBase) AddEvent(ctx context.Context, e events.Event) error {
	msg, err := outbox.JSON(e.ID, e.Subject, e.Payload)
	if err != nil {
		return err
	}
	msgs := []outbox.Message{msg}
	if err := outbox.Add(t.db.WithContext(ctx), msgs...); err != nil {
		return fmt.Errorf("add event %s: %w", e.ID, err)
	}
	if len(t.msgs) == 0 && t.onFirstEvent != nil {
		t.onFirstEvent()
	}
	t.msgs = append(t.msgs, msgs...)
	return nil
}

// inTx runs fn in a transaction of db (gorm's Transaction returns a failed
// commit as an error) and, once it has committed, sends the events it
// added, so the relay publishes them now rather than at its next poll. A
// failed commit sends nothing: it may have committed all the same (a lost
// acknowledgement), and then the poll publishes its events.
func inTx(ctx context.Context, db *gorm.DB, send Send, fn func(*txBase) error) error {
	t := &txBase{}
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		t.db, t.msgs = tx, nil
		return fn(t)
	})
	if err == nil && len(t.msgs) > 0 {
		send(t.msgs...)
	}
	return err
}

// inboxBase is the txBase of tx, an inbox handler's transaction (see
// inbox.Handler): the inbox commits it, so the events are sent through
// inbox.OnCommit once the transaction has added one.
func inboxBase(ctx context.Context, tx *gorm.DB, send Send) *txBase {
	t := &txBase{db: tx}
	t.onFirstEvent = func() { inbox.OnCommit(ctx, func() { send(t.msgs...) }) }
	return t
}
