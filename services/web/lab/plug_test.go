package lab_test

import (
	"net/http"
	"testing"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/web/internal/assembly"
	"github.com/oncemall/oncemall/services/web/internal/config"
	"github.com/oncemall/oncemall/services/web/lab"
)

// TestPlugAddsNothingOutsideLabMode: in production and dev the lab adds no
// section and reads none of its variables; in lab mode it adds its
// section, and refuses a configuration it cannot use.
func TestPlugAddsNothingOutsideLabMode(t *testing.T) {
	for _, env := range []platform.Env{platform.EnvProduction, platform.EnvDev} {
		var o assembly.Options
		err := lab.Plug(&o, config.Config{Env: env}, func(name string) (string, bool) {
			t.Errorf("%s: the lab read %s", env, name)
			return "", false
		})
		if err != nil || len(o.Console) != 0 || o.WrapShop != nil {
			t.Errorf("%s: %v, %d sections; want none", env, err, len(o.Console))
		}
	}
	var o assembly.Options
	if err := lab.Plug(&o, config.Config{Env: platform.EnvLab}, func(string) (string, bool) { return "", false }); err != nil || len(o.Console) != 1 || o.WrapShop == nil {
		t.Fatalf("lab mode: %v, %d sections; want the lab's", err, len(o.Console))
	}
	if s := o.Console[0](nil, http.DefaultClient); s.Path != "/lab" || s.Templates == nil {
		t.Errorf("the lab's section: %+v", s)
	}
	bad := map[string]string{"FAULTPROXY_ADMIN_URL": "not a url"}
	if err := lab.Plug(&assembly.Options{}, config.Config{Env: platform.EnvLab}, func(n string) (string, bool) {
		v, ok := bad[n]
		return v, ok
	}); err == nil {
		t.Error("lab mode with FAULTPROXY_ADMIN_URL=not a url: no error")
	}
}
