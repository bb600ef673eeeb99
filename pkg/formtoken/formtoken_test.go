package formtoken_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/testkit/race"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func newStore(t *testing.T, ttl time.Duration) *formtoken.Store {
	rdb, prefix := testenv.Redis(t)
	s, err := formtoken.New(rdb, formtoken.Config{Prefix: prefix, TTL: ttl})
	testenv.Must(t, err)
	return s
}

func TestConcurrentSubmitsConsumeATokenOnce(t *testing.T) {
	s := newStore(t, time.Minute)
	ctx := context.Background()
	token, err := s.Issue(ctx, "user-1")
	testenv.Must(t, err)

	accepted, err := race.Run(100, func() (bool, error) { return s.Consume(ctx, "user-1", token) })
	testenv.Must(t, err)
	if accepted != 1 {
		t.Fatalf("token accepted %d times, want 1", accepted)
	}
}

func TestTokenIsBoundToItsSubjectAndExpires(t *testing.T) {
	s := newStore(t, time.Second)
	ctx := context.Background()
	token, err := s.Issue(ctx, "user-1")
	testenv.Must(t, err)

	if ok, _ := s.Consume(ctx, "user-2", token); ok {
		t.Fatal("another user consumed the token")
	}
	if ok, _ := s.Consume(ctx, "user-1", "not-a-token"); ok {
		t.Fatal("an unknown token was accepted")
	}
	if ok, err := s.Consume(ctx, "user-1", token); err != nil || !ok {
		t.Fatalf("owner could not consume after a foreign attempt: ok=%v err=%v", ok, err)
	}

	late, err := s.Issue(ctx, "user-1")
	testenv.Must(t, err)
	time.Sleep(1100 * time.Millisecond)
	if ok, _ := s.Consume(ctx, "user-1", late); ok {
		t.Fatal("an expired token was accepted")
	}
}
