package outbox

import (
	"context"
	"errors"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestSettleChangesOnlyTheRowsOfItsClaim: the settle of a batch whose rows
// were claimed again by another relay (they carry another token now) marks
// nothing sent, reschedules nothing and defers nothing: the claim's token,
// not the lease's timing, is what keeps a late relay off rows it no longer
// owns.
func TestSettleChangesOnlyTheRowsOfItsClaim(t *testing.T) {
	db := testenv.DB(t, Migrations)
	for i := range 3 {
		testenv.Must(t, Add(db, Message{ID: "m" + string(rune('0'+i)), Subject: "s.x", Body: []byte(`{}`)}))
	}
	r := &Relay{db: db, cfg: Config{BatchSize: 10}.WithDefaults(), log: testenv.Logger(t), m: mustMetrics(t)}
	rows, token, err := r.claim(context.Background(), 0)
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	testenv.Must(t, db.Exec("UPDATE local_message SET claim_token = 'another-relay-00'").Error)

	out := settlement{
		sent:     []uint64{rows[0].ID},
		deferred: []uint64{rows[1].ID}, firstDeferErr: errors.New("cut off"),
		failed: []failedRow{{rows[2], errors.New("refused")}},
	}
	retried, failed, err := r.settle(context.Background(), token, out)
	if err != nil || retried != 0 || failed != 0 {
		t.Fatalf("settle: retried %d, failed %d, %v; want nothing settled", retried, failed, err)
	}
	var changed int64
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM local_message WHERE status <> 'pending' OR retry_count <> 0 OR last_error IS NOT NULL OR claim_token <> 'another-relay-00'").Row().Scan(&changed))
	if changed != 0 {
		t.Fatalf("%d rows changed by a settle whose claim was taken over", changed)
	}
}

func mustMetrics(t *testing.T) *metrics {
	t.Helper()
	m, err := newMetrics(nil)
	testenv.Must(t, err)
	return m
}
