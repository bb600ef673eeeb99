// Command order runs the oncemall order service: orders priced from the
// catalog, their stock reserved and their coupon locked, paid, cancelled or
// closed; the catalog and its batch copy. `order --help` lists every variable.
package main

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/lab"
)

func main() { platform.Main(service) }

var service = assembly.Definition(wire)

func wire(w *platform.Wiring, cfg config.Config) error {
	var o assembly.Options
	lab.Plug(&o, cfg) // lab mode's broken variants; a fork deletes this line and lab/
	_, err := assembly.Assemble(w, cfg, o)
	return err
}
