package outbox

import "context"

// SetAfterPublish makes r call fn after each batch's PubAcks, claimed or
// sent, and before the batch is settled; an error from fn abandons the
// batch as a crash at that point would.
func SetAfterPublish(r *Relay, fn func(ctx context.Context, ids []string) error) { r.afterPublish = fn }

// PollBatch is one step of the poll: PublishBatch leaving the rows in
// their hand-off to Send.
func PollBatch(ctx context.Context, r *Relay) (int, error) { return r.publishBatch(ctx, r.cfg.Handoff) }

// PollNow is the poll's wake-up without the backlog sample of Poll, for a
// test's fast stand-in for the cron schedule.
func PollNow(r *Relay) { r.pollNow() }
