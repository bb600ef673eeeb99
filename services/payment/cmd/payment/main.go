// Command payment runs the oncemall payment service: payments, the platform's notifications
// (incident 2), closed charges, queries and late refunds. `payment --help` lists variables.
package main

import (
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	"github.com/oncemall/oncemall/services/payment/lab"
)

func main() { platform.Main(service) }

var service = assembly.Definition(wire)

func wire(w *platform.Wiring, cfg config.Config) error {
	var o assembly.Options
	lab.Plug(&o, cfg) // lab mode's broken variants; a fork deletes this line and lab/
	_, err := assembly.Assemble(w, cfg, o)
	return err
}
