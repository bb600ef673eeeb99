package pspsim_test

import (
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// TestComposeDockerfileAndREADMEMatch is the simulator's drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndREADMEMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "psp-sim",
		Dir:      "services/psp-sim/cmd/psp-sim",
		Vars:     pkgconfig.Vars(&pspsim.Config{}),
		AddrVars: []string{"PSP_HTTP_ADDR"},
		// The simulator depends on nothing, so live is ready: /healthz.
		HealthPath: "/healthz",
	})
}
