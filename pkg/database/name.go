package database

import (
	"errors"
	"regexp"

	"github.com/oncemall/oncemall/pkg/config"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// CheckName reports whether name is usable as a service's database name: 1
// to 64 ASCII letters, digits and underscores, naming the variable in the
// error. MySQL allows more, but a name that needs quoting anywhere it is
// written (a shell, a DSN, a migration tool) is a mistake, not a choice.
func CheckName(varName, name string) error {
	if !validName.MatchString(name) {
		return &config.Error{Var: varName, Value: name, Err: errors.New("must be 1 to 64 letters, digits or underscores")}
	}
	return nil
}
