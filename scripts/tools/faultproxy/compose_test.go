package main

import (
	"testing"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestComposeAndREADMEMatchTheConfig keeps docker-compose.yml, the Dockerfile
// and the README's table in step with faultproxy.Config.
func TestComposeAndREADMEMatchTheConfig(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "faultproxy",
		Dir:      "scripts/tools/faultproxy",
		Vars:     config.Vars(&faultproxy.Config{}),
		AddrVars: []string{"FAULTPROXY_ADMIN_ADDR", "FAULTPROXY_ADDR"},
	})
}
