package outbox

import "context"

// SetAfterPublish makes r call fn after each batch's PubAcks and before the
// batch is settled; an error from fn abandons the batch as a crash at that
// point would.
func SetAfterPublish(r *Relay, fn func(ctx context.Context, ids []string) error) { r.afterPublish = fn }
