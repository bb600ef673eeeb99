package composecheck_test

import (
	"testing"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// pspConfig stands in for the PSP simulator's real configuration struct.
type pspConfig struct {
	HTTPAddr    string `env:"PSP_HTTP_ADDR" default:":8090"`
	Secret      string `env:"PSP_SECRET" default:"dev-psp-secret-not-for-production"`
	CallbackURL string `env:"PSP_CALLBACK_URL" default:"http://127.0.0.1:8083/payments/callback"`
}

// Adding a program to the drift test is one test in its module, next to its
// configuration (internal packages cannot be imported from elsewhere). The
// PSP simulator's would read like this, with the fault proxy's the same with
// AddrVars FAULTPROXY_ADMIN_ADDR (which serves /healthz) and FAULTPROXY_ADDR.
func ExampleRun() {
	var t testing.TB // the test's *testing.T
	composecheck.Run(t, composecheck.Program{
		Service:  "psp-sim",
		Dir:      "services/psp-sim/cmd/psp-sim",
		Vars:     config.Vars(&pspConfig{}),
		AddrVars: []string{"PSP_HTTP_ADDR"},
	})
}
