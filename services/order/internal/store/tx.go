package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
)

// txBase is what a transaction of either store shares: the gorm transaction
// and the events it wrote to the outbox.
type txBase struct {
	db *gorm.DB
	// added is set by the first AddEvent.
	added bool
	// onFirstEvent, when set, runs at the first AddEvent: a transaction
	// owned by the inbox registers the relay's wake-up there (see
	// inboxBase).
	onFirstEvent func()
}

// AddEvent writes e to the outbox (local_message) in the transaction.
func (t *txBase) AddEvent(ctx context.Context, e events.Event) error {
	msg, err := outbox.JSON(e.ID, e.Subject, e.Payload)
	if err != nil {
		return err
	}
	if err := outbox.Add(t.db.WithContext(ctx), msg); err != nil {
		return fmt.Errorf("add event %s: %w", e.ID, err)
	}
	if !t.added && t.onFirstEvent != nil {
		t.onFirstEvent()
	}
	t.added = true
	return nil
}

// inTx runs fn in a transaction of db (gorm's Transaction returns a failed
// commit as an error) and calls wake after a commit that added events, so
// the relay publishes them now rather than at its next poll.
func inTx(ctx context.Context, db *gorm.DB, wake func(), fn func(*txBase) error) error {
	t := &txBase{}
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		t.db = tx
		return fn(t)
	})
	if err == nil && t.added {
		wake()
	}
	return err
}

// inboxBase is the txBase of tx, an inbox handler's transaction (see
// inbox.Handler): the inbox commits it, so the relay is woken through
// inbox.OnCommit once the transaction has added an event.
func inboxBase(ctx context.Context, tx *gorm.DB, wake func()) *txBase {
	return &txBase{db: tx, onFirstEvent: func() { inbox.OnCommit(ctx, wake) }}
}
