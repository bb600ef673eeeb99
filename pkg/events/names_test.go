package events_test

import (
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/events"
)

func TestCheckStreamNameAndSubjectPrefix(t *testing.T) {
	for _, ok := range []string{"ORDER", "E2E_ab12_PAYMENT"} {
		if err := events.CheckStreamName("S", ok); err != nil {
			t.Errorf("stream %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "A.B", "A*", "A>", "A B"} {
		if err := events.CheckStreamName("S", bad); err == nil || !strings.Contains(err.Error(), "S=") {
			t.Errorf("stream %q: error %v, want one naming S", bad, err)
		}
	}
	for _, ok := range []string{"", "e2e1.", "a.b."} {
		if err := events.CheckSubjectPrefix("P", ok); err != nil {
			t.Errorf("prefix %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"e2e1", ".e2e1.", "a..b.", "a*.", "a>.", "a b."} {
		if err := events.CheckSubjectPrefix("P", bad); err == nil || !strings.Contains(err.Error(), "P=") {
			t.Errorf("prefix %q: error %v, want one naming P", bad, err)
		}
	}
}
