package user_test

import (
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/oncemall/oncemall/services/identity/internal/user"
)

// TestPasswords: a user's own password matches and no other does; an
// unknown user matches nothing, not even the dummy's own password, and is
// checked against a hash of the same cost as the real ones, which is what
// makes both paths take the same time (BenchmarkMatches measures them).
func TestPasswords(t *testing.T) {
	p, err := user.NewPasswords(bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hash, err := p.Hash("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if cost, _ := bcrypt.Cost(hash); cost != bcrypt.MinCost {
		t.Fatalf("hash cost %d, want %d", cost, bcrypt.MinCost)
	}
	u := user.User{ID: 1, Username: "alice", PasswordHash: hash}
	if !p.Matches(u, true, "correct horse") || p.Matches(u, true, "Correct horse") || p.Matches(u, true, "") {
		t.Fatal("a user's password check is wrong")
	}
	for _, pw := range []string{"no one's password", "correct horse", ""} {
		if p.Matches(user.User{}, false, pw) || p.Matches(u, false, "correct horse") {
			t.Fatalf("an unknown user matched %q", pw)
		}
	}
	if _, err := p.Hash(""); err == nil {
		t.Fatal("an empty password was hashed")
	}
	if _, err := user.NewPasswords(bcrypt.MaxCost + 1); err == nil {
		t.Fatal("a cost above bcrypt's maximum was accepted")
	}
}

// BenchmarkMatches compares a known user's check with an unknown user's:
// they must cost the same (compare ns/op), or the answer's timing tells
// which names exist.
func BenchmarkMatches(b *testing.B) {
	p, err := user.NewPasswords(bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	hash, _ := p.Hash("correct horse")
	u := user.User{ID: 1, PasswordHash: hash}
	b.Run("known-user-wrong-password", func(b *testing.B) {
		for b.Loop() {
			p.Matches(u, true, "guess")
		}
	})
	b.Run("unknown-user", func(b *testing.B) {
		for b.Loop() {
			p.Matches(user.User{}, false, "guess")
		}
	})
}
