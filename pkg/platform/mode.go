package platform

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/variant"
)

// checkModes walks cfg (a struct) for variant.Mode fields and refuses every one that
// is not Fixed unless env is EnvLab, naming its variable.
func checkModes(cfg any, env Env) error {
	if env == EnvLab {
		return nil
	}
	var errs []error
	walkModes(reflect.ValueOf(cfg), func(name string, m variant.Mode) {
		if m != variant.Fixed {
			errs = append(errs, &config.Error{Var: name, Value: string(m),
				Err: fmt.Errorf("a lab variant runs only with ONCEMALL_ENV=lab (make lab and the tests set it); ONCEMALL_ENV is %s", env)})
		}
	})
	return errors.Join(errs...)
}

func walkModes(v reflect.Value, visit func(name string, m variant.Mode)) {
	t := v.Type()
	for i := range t.NumField() {
		sf, f := t.Field(i), v.Field(i)
		if !sf.IsExported() {
			continue
		}
		if m, ok := f.Interface().(variant.Mode); ok {
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
