// Command coupon runs the oncemall coupon service: coupons, the locks orders
// take on them, and their deduction for the orders paid with them
// (incident 1). `coupon --help` lists the commands and every variable.
package main

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
)

func main() { platform.Main(service) }

var service = assembly.Definition(wire)

// wire builds the service (internal/assembly) with production's parts.
func wire(w *platform.Wiring, cfg config.Config) error {
	var o assembly.Options
	_, err := assembly.Assemble(w, cfg, o)
	return err
}
