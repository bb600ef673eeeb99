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

// Config is where a deployment's events live (EVENT_SUBJECT_PREFIX). The
// services write and consume the plain subjects of this package; the
// platform puts Prefix before every subject it publishes or consumes and
// derives every stream name from it, so a test, a lab run or a second
// deployment on the same NATS gets streams of its own.
type Config struct {
	SubjectPrefix string `env:"EVENT_SUBJECT_PREFIX" default:"" usage:"put before every subject, and (upper-cased, dots as underscores) before every stream name; empty in production, tests set a unique one ending in a dot"`
	// StreamReplicas is how many copies a JetStream cluster keeps of each
	// stream the services declare.
	StreamReplicas int `env:"EVENT_STREAM_REPLICAS" default:"1" usage:"replicas of each declared stream: 1 on a single NATS server, 3 on a three-node JetStream cluster"`
}

// Validate checks the prefix and the replica count.
func (c Config) Validate() error {
	return errors.Join(
		CheckSubjectPrefix("EVENT_SUBJECT_PREFIX", c.SubjectPrefix),
		config.CheckRange("EVENT_STREAM_REPLICAS", c.StreamReplicas, 1, 5),
	)
}

// Subject returns subject as published and consumed: Prefix + subject.
func (c Config) Subject(subject string) string { return c.SubjectPrefix + subject }

// StreamName returns the name of the stream that carries subject ("order.paid"
// is carried by ORDER, or by T1_ORDER under the prefix "t1.").
func (c Config) StreamName(subject string) string {
	root, _, _ := strings.Cut(subject, ".")
	return strings.ToUpper(strings.ReplaceAll(c.SubjectPrefix, ".", "_") + root)
}
