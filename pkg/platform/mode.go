package platform

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/oncemall/oncemall/pkg/config"
)

// Mode selects the code path of one incident: Fixed, the only one a
// deployment runs, or a variant kept for the lab (Broken, or another the
// service names). A service declares its modes in one place, as Mode
// fields of its Config with an env tag; Run refuses to start with any of
// them other than Fixed unless ONCEMALL_ENV=lab.
type Mode string

// The modes every incident has.
const (
	// Fixed is the fix, and the default of every Mode setting.
	Fixed Mode = "fixed"
	// Broken reproduces the incident.
	Broken Mode = "broken"
)

// checkModes walks cfg (a struct) for Mode fields and refuses every one that
// is not Fixed unless env is EnvLab, naming its variable.
func checkModes(cfg any, env Env) error {
	if env == EnvLab {
		return nil
	}
	var errs []error
	walkModes(reflect.ValueOf(cfg), func(name string, m Mode) {
		if m != Fixed {
			errs = append(errs, &config.Error{Var: name, Value: string(m),
				Err: fmt.Errorf("a lab variant runs only with ONCEMALL_ENV=lab (make lab and the tests set it); ONCEMALL_ENV is %s", env)})
		}
	})
	return errors.Join(errs...)
}

func walkModes(v reflect.Value, visit func(name string, m Mode)) {
	t := v.Type()
	for i := range t.NumField() {
		sf, f := t.Field(i), v.Field(i)
		if !sf.IsExported() {
			continue
		}
		if m, ok := f.Interface().(Mode); ok {
			if name := sf.Tag.Get("env"); name != "" {
				visit(name, m)
			}
			continue
		}
		if f.Kind() == reflect.Struct {
			walkModes(f, visit)
		}
	}
}
