// Package configtest holds the checks every program's configuration test
// runs: a bad value must stop the program with an error that names the
// variable, so an operator knows what to fix.
package configtest

import (
	"maps"
	"strings"
	"testing"
)

// PlatformBadValues are unusable values for variables every service reads:
// those of platform.Config, and HTTP_ADDR and MYSQL_DATABASE, which each
// service declares with its own default.
var PlatformBadValues = map[string]string{
	"HTTP_ADDR":            ":abc",
	"MYSQL_DATABASE":       "bad`name",
	"MYSQL_MAX_OPEN_CONNS": "x",
	"NATS_URL":             "not a url",
	"SHUTDOWN_TIMEOUT":     "10",
	"LOG_LEVEL":            "loud",
}

// With returns PlatformBadValues plus more, for a service's own variables.
func With(more map[string]string) map[string]string {
	out := maps.Clone(PlatformBadValues)
	maps.Copy(out, more)
	return out
}

// BadValuesNamed sets each variable of bad to its value, alone, in a subtest
// and checks that load fails with an error naming that variable. load reads
// the process environment, as the program's own Load does.
func BadValuesNamed(t *testing.T, load func() error, bad map[string]string) {
	t.Helper()
	for name, value := range bad {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			err := load()
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%q: error %v does not name the variable", name, value, err)
			}
		})
	}
}
