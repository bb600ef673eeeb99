package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/identity/internal/store"
	"github.com/oncemall/oncemall/services/identity/internal/user"
	"github.com/oncemall/oncemall/services/identity/migrations"
)

// TestCreateIfAbsentRacesToOneRow: replicas seeding the same user at once
// write one row, and exactly one of them reports it created it; the user
// reads back by name in any case, with its roles.
func TestCreateIfAbsentRacesToOneRow(t *testing.T) {
	db := testenv.DB(t, migrations.Source)
	s := store.New(db)
	ctx := context.Background()
	u := user.User{ID: 42, Username: "alice", PasswordHash: []byte("$2a$04$hash"), Roles: []string{"customer", "operator"}}
	var created atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ok, err := s.CreateIfAbsent(ctx, u)
			if err != nil {
				t.Error(err)
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	var rows int
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM users").Scan(&rows).Error)
	if rows != 1 || created.Load() != 1 {
		t.Fatalf("%d rows, %d callers created one; want 1 and 1", rows, created.Load())
	}
	got, err := s.ByUsername(ctx, "ALICE")
	if err != nil || got.ID != 42 || len(got.Roles) != 2 || got.Roles[1] != "operator" || string(got.PasswordHash) != "$2a$04$hash" {
		t.Fatalf("ByUsername: %+v, %v", got, err)
	}
	if ok, err := s.CreateIfAbsent(ctx, user.User{ID: 7, Username: "alice", PasswordHash: []byte("x")}); ok || err != nil {
		t.Fatalf("another id under a taken name: created %v, %v", ok, err)
	}
	if _, err := s.ByUsername(ctx, "mallory"); !errors.Is(err, user.ErrNotFound) {
		t.Fatalf("an unknown name: %v, want ErrNotFound", err)
	}
}
