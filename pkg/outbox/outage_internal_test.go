package outbox

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Only a publish the client could not send proves nothing was stored.
// Anything after which the message may sit in the stream, or may itself be
// at fault, is not; no responders is neither by itself (classify asks
// JetStream what it means).
func TestIsDisconnected(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("%w (RECONNECTING)", errNotConnected), true},
		{fmt.Errorf("publish: %w", nats.ErrConnectionClosed), true},
		{jetstream.ErrConnectionClosed, true},
		{fmt.Errorf("publish: %w", nats.ErrReconnectBufExceeded), true},
		{nats.ErrNoResponders, false},
		{jetstream.ErrNoStreamResponse, false},
		{jetstream.ErrAsyncPublishTimeout, false},
		{errors.New("no PubAck within the publish timeout"), false},
		{nats.ErrDisconnected, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10054, Description: "message size exceeds maximum allowed"}, false},
		{errors.New("decode stored headers: bad"), false},
	} {
		if got := isDisconnected(tc.err); got != tc.want {
			t.Errorf("isDisconnected(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
