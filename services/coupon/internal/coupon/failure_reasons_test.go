package coupon

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestFailureReasonsIsTheOneList walks failureReasons itself, which is why it
// is an internal test: every entry is permanent and labelled with its own
// reason (an earlier entry never shadows it), the labels are distinct, and
// the metric's pre-created series are exactly those labels plus the retry
// limit, the label of every transient error.
func TestFailureReasonsIsTheOneList(t *testing.T) {
	var want []string
	for _, r := range failureReasons {
		err := fmt.Errorf("wrapped: %w", r.err)
		if !IsPermanent(err) {
			t.Errorf("%v is in failureReasons but IsPermanent says it is transient", r.err)
		}
		if got := FailureReason(err); got != r.reason {
			t.Errorf("FailureReason(%v) = %q, want its own label %q", r.err, got, r.reason)
		}
		if slices.Contains(want, r.reason) {
			t.Errorf("label %q is listed twice", r.reason)
		}
		want = append(want, r.reason)
	}
	want = append(want, reasonMaxRetries)
	if got := FailureReasons(); !slices.Equal(got, want) {
		t.Errorf("FailureReasons() = %q, want %q", got, want)
	}
	for _, err := range []error{ErrConcurrentChange, errors.New("invalid connection")} {
		if IsPermanent(err) || FailureReason(err) != reasonMaxRetries {
			t.Errorf("%v: IsPermanent %v, FailureReason %q; want transient, %q", err, IsPermanent(err), FailureReason(err), reasonMaxRetries)
		}
	}
}
