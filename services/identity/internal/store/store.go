// Package store implements user.Store on MySQL/MariaDB through gorm.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/services/identity/internal/user"
)

// Store is the MySQL user.Store.
type Store struct {
	db  *gorm.DB
	now func() time.Time
}

var _ user.Store = (*Store)(nil)

// New returns a Store over db.
func New(db *gorm.DB) *Store { return &Store{db: db, now: time.Now} }

// userRow is a row of users.
type userRow struct {
	ID           uint64 `gorm:"primaryKey"`
	Username     string
	PasswordHash []byte
	Roles        string
	CreatedAt    time.Time
}

func (userRow) TableName() string { return "users" }

func (r userRow) toDomain() user.User {
	var roles []string
	if r.Roles != "" {
		roles = strings.Split(r.Roles, ",")
	}
	return user.User{ID: r.ID, Username: r.Username, PasswordHash: r.PasswordHash, Roles: roles}
}

// ByUsername implements user.Store; the column's collation makes the
// comparison case-insensitive.
func (s *Store) ByUsername(ctx context.Context, username string) (user.User, error) {
	var row userRow
	err := s.db.WithContext(ctx).Where("username = ?", username).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return user.User{}, fmt.Errorf("user %q: %w", username, user.ErrNotFound)
	}
	if err != nil {
		return user.User{}, fmt.Errorf("read user %q: %w", username, err)
	}
	return row.toDomain(), nil
}

// CreateIfAbsent implements user.Store: a duplicate id or name is left as
// it is (ON DUPLICATE KEY UPDATE of nothing), which rows affected tells: 1
// for a row inserted, 0 for one left alone. A plain statement, as gorm's
// Create would add RETURNING on MariaDB and count the row returned.
func (s *Store) CreateIfAbsent(ctx context.Context, u user.User) (bool, error) {
	var id any // NULL: the next AUTO_INCREMENT
	if u.ID != 0 {
		id = u.ID
	}
	res := s.db.WithContext(ctx).Exec(
		"INSERT INTO users (id, username, password_hash, roles, created_at) VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id",
		id, u.Username, u.PasswordHash, strings.Join(u.Roles, ","), s.now().UTC())
	if res.Error != nil {
		return false, fmt.Errorf("insert user %q: %w", u.Username, res.Error)
	}
	return res.RowsAffected == 1, nil
}
