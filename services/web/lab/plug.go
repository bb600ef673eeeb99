// Package lab is the storefront's part of the incident lab: the console's
// switches (a lost COMMIT acknowledgement on the MySQL fault proxy, a storm
// of payment notifications from the simulator, a double submit), each
// beside live counts of what the learner's clicks made and what was
// absorbed. It exists in lab mode only (ONCEMALL_ENV=lab): cmd/web's wire
// plugs it with one line, and in any other mode Plug adds nothing, so the
// switches' pages are not there at all (404). A fork deletes this
// directory and that line.
package lab

import (
	"net/http"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/web/internal/assembly"
	"github.com/oncemall/oncemall/services/web/internal/config"
	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// Plug adds the lab's switches to the console when cfg is lab mode,
// reading the lab's own settings (Config) with lookup; in any other mode it
// adds nothing and reads nothing.
func Plug(o *assembly.Options, cfg config.Config, lookup pkgconfig.LookupFunc) error {
	if cfg.Env != platform.EnvLab {
		return nil
	}
	lc, err := LoadConfig(lookup)
	if err != nil {
		return err
	}
	d := &doubler{}
	o.WrapShop = func(shop pages.Shop) pages.Shop {
		d.Shop = shop
		return d
	}
	o.Console = append(o.Console, func(client *upstream.Client, hc *http.Client) pages.Section {
		return newSwitches(lc, cfg, client, hc, d).section()
	})
	return nil
}
