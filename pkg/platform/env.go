package platform

import (
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/config"
)

// Env is where a program runs (ONCEMALL_ENV). It decides two things a
// deployment must never get by accident: the published development secrets
// and the incidents' broken variants.
type Env string

// The environments. Production is the default, so a deployment that sets
// nothing gets the strict one.
const (
	// EnvProduction refuses the development secrets and every broken
	// variant.
	EnvProduction Env = "production"
	// EnvDev is a developer's machine (make run, docker compose): the
	// development secrets are allowed, the broken variants are not.
	EnvDev Env = "dev"
	// EnvLab is the incident lab (make lab, the tests, the compose lab
	// profile): the development secrets and the broken variants are
	// allowed.
	EnvLab Env = "lab"
)

// Development reports whether e allows the published development secrets
// and keys: dev and lab.
func (e Env) Development() bool { return e == EnvDev || e == EnvLab }

// minSecretLen is the shortest secret accepted outside dev and lab.
const minSecretLen = 16

// CheckSecret checks the secret in variable name: never empty, and outside
// dev and lab neither one of the published development values nor shorter
// than 16 bytes.
func (e Env) CheckSecret(name, value string, devValues ...string) error {
	fail := func(msg string) error { return &config.Error{Var: name, Value: "<redacted>", Err: errors.New(msg)} }
	if value == "" {
		return fail("a secret is required and this one is empty")
	}
	if e.Development() {
		return nil
	}
	for _, dev := range devValues {
		if value == dev {
			return fail(fmt.Sprintf("this is the published development value, refused with ONCEMALL_ENV=%s; set a secret of your own (or ONCEMALL_ENV=dev on a developer's machine)", e))
		}
	}
	if len(value) < minSecretLen {
		return fail(fmt.Sprintf("shorter than %d bytes, refused with ONCEMALL_ENV=%s", minSecretLen, e))
	}
	return nil
}
