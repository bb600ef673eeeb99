package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/services/identity/internal/user"
)

// NewUser is a user to create, with the password in the clear.
type NewUser struct {
	ID       uint64
	Username string
	Password string
	Roles    []string
}

// DevUsers are the published development users that make run and compose
// sign in as. Their passwords are public: the service seeds them only
// outside production (see cmd/identity). Alice is user 42, the customer of
// docs/purchase-flow.md.
var DevUsers = []NewUser{
	{ID: 42, Username: "alice", Password: "alice-dev-password", Roles: []string{auth.RoleCustomer}},
	{ID: 43, Username: "bob", Password: "bob-dev-password", Roles: []string{auth.RoleCustomer}},
	{ID: 1, Username: "operator", Password: "operator-dev-password", Roles: []string{auth.RoleOperator}},
}

// SeedUsers creates each of users that does not exist yet (by id or name),
// leaving existing ones as they are, and returns how many it created.
func (a *App) SeedUsers(ctx context.Context, users []NewUser) (int, error) {
	created := 0
	for _, nu := range users {
		hash, err := a.passwords.Hash(nu.Password)
		if err != nil {
			return created, fmt.Errorf("seed user %q: %w", nu.Username, err)
		}
		ok, err := a.users.CreateIfAbsent(ctx, user.User{ID: nu.ID, Username: user.NormalizeUsername(nu.Username), PasswordHash: hash, Roles: nu.Roles})
		if err != nil {
			return created, fmt.Errorf("seed user %q: %w", nu.Username, err)
		}
		if ok {
			created++
		}
	}
	return created, nil
}
