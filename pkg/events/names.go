package events

import (
	"errors"
	"strings"

	"github.com/oncemall/oncemall/pkg/config"
)

// CheckStreamName reports a stream name JetStream would refuse, naming the
// variable it came from.
func CheckStreamName(variable, name string) error {
	if name == "" || strings.ContainsAny(name, ".*> \t") {
		return &config.Error{Var: variable, Value: name, Err: errors.New("want a stream name without '.', '*', '>' or spaces")}
	}
	return nil
}

// CheckSubjectPrefix reports a subject prefix that cannot be put before a
// subject such as PaymentSucceeded: it must be empty (production) or whole
// tokens ending in a dot, without wildcards, naming the variable.
func CheckSubjectPrefix(variable, prefix string) error {
	if prefix == "" {
		return nil
	}
	if !strings.HasSuffix(prefix, ".") || strings.HasPrefix(prefix, ".") || strings.Contains(prefix, "..") || strings.ContainsAny(prefix, "*> \t") {
		return &config.Error{Var: variable, Value: prefix, Err: errors.New(`want empty, or subject tokens ending in a dot ("e2e1.")`)}
	}
	return nil
}
