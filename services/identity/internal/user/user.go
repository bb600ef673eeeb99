// Package user is the identity service's domain: the people who sign in,
// their password hashes and their roles. It imports no database or HTTP
// package.
package user

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Sentinel errors of the domain.
var (
	// ErrNotFound is a user the store does not hold.
	ErrNotFound = errors.New("user not found")
	// ErrInvalid is a user that cannot be stored: no name, no password.
	ErrInvalid = errors.New("invalid user")
)

// User is someone who signs in.
type User struct {
	ID           uint64
	Username     string
	PasswordHash []byte
	Roles        []string
}

// Store holds the users.
type Store interface {
	// ByUsername returns the user named username (compared without regard
	// to case), or ErrNotFound.
	ByUsername(ctx context.Context, username string) (User, error)
	// CreateIfAbsent inserts u, with its ID when it is not zero, unless a
	// user with that ID or name exists; it reports whether it inserted.
	// Concurrent calls for one user insert it once.
	CreateIfAbsent(ctx context.Context, u User) (bool, error)
}

// NormalizeUsername is how a name is compared: trimmed and lower-cased.
func NormalizeUsername(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Passwords hashes and checks passwords with bcrypt at one cost.
type Passwords struct {
	cost int
	// dummy is a hash of no one's password at the same cost: checking a
	// password for a user who does not exist against it takes as long as
	// checking a real one, so the answer's timing does not tell which
	// names exist.
	dummy []byte
}

// NewPasswords returns bcrypt hashing at cost (bcrypt.MinCost to
// bcrypt.MaxCost).
func NewPasswords(cost int) (*Passwords, error) {
	dummy, err := bcrypt.GenerateFromPassword([]byte("no one's password"), cost)
	if err != nil {
		return nil, fmt.Errorf("bcrypt cost %d: %w", cost, err)
	}
	return &Passwords{cost: cost, dummy: dummy}, nil
}

// Hash returns the hash of password to store.
func (p *Passwords) Hash(password string) ([]byte, error) {
	if password == "" {
		return nil, fmt.Errorf("%w: empty password", ErrInvalid)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), p.cost)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return h, nil
}

// Matches reports whether password is u's. With found false (no such
// user) it checks against the dummy hash and reports false, taking the
// same time.
func (p *Passwords) Matches(u User, found bool, password string) bool {
	hash := u.PasswordHash
	if !found {
		hash = p.dummy
	}
	ok := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	return ok && found
}

// Cost is the bcrypt cost new hashes get.
func (p *Passwords) Cost() int { return p.cost }
