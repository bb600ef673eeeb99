package lab_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// plugged are the Options fields lab.Plug may set: incident 2's handler.
var plugged = []string{"Paid"}

// TestLabDiffersFromProductionOnlyInThePlug builds the service twice as
// main does, once as production (no Plug: what a fork that deleted lab/
// builds) and once in lab mode with every broken variant asked for and
// Plug's substitutions: both declare the same routes, consumers and jobs,
// and the Options differ only in the fields Plug is named to set. Outside
// lab mode Plug sets nothing.
func TestLabDiffersFromProductionOnlyInThePlug(t *testing.T) {
	svc := assembly.Definition(nil)
	build := func(vars map[string]string, plug bool) (platform.Declarations, assembly.Options) {
		t.Helper()
		cfg := svctest.Config(t, svc, vars, "order")
		w, err := platform.Build(context.Background(), svc, cfg, testenv.Logger(t))
		testenv.Must(t, err)
		t.Cleanup(func() {
			// Serve on an ended context shuts down what Build started.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = w.Serve(ctx)
		})
		sqlDB, err := w.DB.DB()
		testenv.Must(t, err)
		testenv.Must(t, migrate.Up(context.Background(), sqlDB, paymentlab.Schema))
		var o assembly.Options
		if plug {
			paymentlab.Plug(&o, cfg)
		}
		_, err = assembly.Assemble(w, cfg, o)
		testenv.Must(t, err)
		return w.Declared(), o
	}
	prod, prodOpts := build(nil, false)
	lab, labOpts := build(map[string]string{"PAYMENT_CALLBACK_MODE": string(variant.Broken)}, true)

	if !reflect.DeepEqual(prod, lab) {
		t.Fatalf("declarations differ:\nproduction %+v\nlab        %+v", prod, lab)
	}
	if len(prod.Routes) == 0 || len(prod.Consumers) == 0 || len(prod.Jobs) == 0 {
		t.Fatalf("nothing to compare: %+v", prod)
	}
	differ := optionsDiffer(prodOpts, labOpts)
	if !slices.Equal(differ, plugged) {
		t.Fatalf("lab and production Options differ in %v, want exactly %v", differ, plugged)
	}
	if prodOpts.Paid != nil {
		t.Fatal("production substitutes the notification handler")
	}

	cfg := svctest.Config(t, svc, map[string]string{"PAYMENT_CALLBACK_MODE": string(variant.Broken)})
	cfg.Env = platform.EnvProduction
	var o assembly.Options
	paymentlab.Plug(&o, cfg)
	if d := optionsDiffer(assembly.Options{}, o); len(d) != 0 {
		t.Fatalf("outside lab mode Plug set %v", d)
	}
}

// optionsDiffer names the fields of a and b that differ: funcs and
// interfaces by what they hold.
func optionsDiffer(a, b assembly.Options) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		same := false
		switch fa.Kind() {
		case reflect.Func:
			same = fa.IsNil() == fb.IsNil() && (fa.IsNil() || fa.Pointer() == fb.Pointer())
		default:
			same = reflect.DeepEqual(fa.Interface(), fb.Interface())
		}
		if !same {
			out = append(out, va.Type().Field(i).Name)
		}
	}
	return out
}
