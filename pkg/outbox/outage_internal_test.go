package outbox

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Only failures that prove nothing was stored are outages; anything after
// which the message may sit in the stream, or may itself be at fault,
// spends a retry.
func TestIsOutage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w (RECONNECTING)", errNotConnected), true},
		{fmt.Errorf("publish: %w", nats.ErrConnectionClosed), true},
		{jetstream.ErrConnectionClosed, true},
		{fmt.Errorf("publish: %w", nats.ErrReconnectBufExceeded), true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrNoStreamResponse, true},
		{jetstream.ErrAsyncPublishTimeout, false},
		{errors.New("no PubAck within the publish timeout"), false},
		{nats.ErrDisconnected, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10054, Description: "message size exceeds maximum allowed"}, false},
		{errors.New("decode stored headers: bad"), false},
	} {
		if got := isOutage(tc.err); got != tc.want {
			t.Errorf("isOutage(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
