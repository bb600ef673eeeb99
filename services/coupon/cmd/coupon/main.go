// Command coupon runs the oncemall coupon service: coupons, the locks orders
// take on them, and their deduction for the orders paid with them
// (incident 1). `coupon --help` lists the commands and every variable.
package main

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/lab"
)

func main() { platform.Main(service) }

var service = assembly.Definition(wire)

// wire builds the service (internal/assembly) with production's parts, or
// in lab mode with the incident variants the modes select.
func wire(w *platform.Wiring, cfg config.Config) error {
	var o assembly.Options
	lab.Plug(&o, cfg) // lab mode's broken variants; a fork deletes this line and lab/
	_, err := assembly.Assemble(w, cfg, o)
	return err
}
