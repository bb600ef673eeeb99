package database_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestIsDeadlock provokes a real deadlock (two transactions locking two
// rows in opposite orders) and checks that the victim's error is recognised.
func TestIsDeadlock(t *testing.T) {
	db := testenv.DB(t)
	if err := db.Exec("CREATE TABLE d (k INT PRIMARY KEY, v INT) ENGINE=InnoDB").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO d VALUES (1, 0), (2, 0)").Error; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	locked := make(chan struct{}, 2)
	errs := make(chan error, 2)
	for _, order := range [][2]int{{1, 2}, {2, 1}} {
		go func() {
			tx := db.WithContext(ctx).Begin()
			defer tx.Rollback()
			if err := tx.Exec("UPDATE d SET v = v + 1 WHERE k = ?", order[0]).Error; err != nil {
				errs <- err
				return
			}
			locked <- struct{}{}
			// Wait until both hold their first row, then reach for the other's.
			for len(locked) < 2 {
				time.Sleep(time.Millisecond)
			}
			errs <- tx.Exec("UPDATE d SET v = v + 1 WHERE k = ?", order[1]).Error
		}()
	}
	var got []error
	for range 2 {
		got = append(got, <-errs)
	}
	victims := 0
	for _, err := range got {
		if database.IsDeadlock(err) {
			victims++
		}
	}
	if victims != 1 {
		t.Fatalf("errors %v: %d recognised as deadlock, want 1", got, victims)
	}
	if database.IsDeadlock(errors.New("Deadlock found")) || database.IsDeadlock(nil) || database.IsDeadlock(fmt.Errorf("wrapped: %w", errors.New("x"))) {
		t.Fatal("a plain error or nil is reported as a deadlock")
	}
}
