package database

import (
	"errors"
	"regexp"

	"github.com/oncemall/oncemall/pkg/config"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// errBadName is why a database name is refused. IsPermanent knows it: no
// retry makes a bad name good.
var errBadName = errors.New("must be 1 to 64 letters, digits or underscores")

// CheckName reports whether name is usable as a service's database name: 1
// to 64 ASCII letters, digits and underscores, naming the variable in the
// error. MySQL allows more, but a name that needs quoting anywhere it is
// written (a shell, a DSN, a migration tool) is a mistake, not a choice.
// EnsureDatabase and DropDatabase check the name again, where it reaches
// SQL; a service's config calls CheckName to name the variable at start-up.
func CheckName(varName, name string) error {
	if err := checkName(name); err != nil {
		return &config.Error{Var: varName, Value: name, Err: err}
	}
	return nil
}

func checkName(name string) error {
	if !validName.MatchString(name) {
		return errBadName
	}
	return nil
}
