package lab_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

// plugged are the Options fields lab.Plug may set: the substitutions the
// lab is allowed to make. Anything else it set would be a difference
// between the lab's service and production's that no one named.
var plugged = []string{"Deducer", "Lab"}

// setFields names the fields of o that are not their zero value.
func setFields(o assembly.Options) []string {
	var set []string
	v := reflect.ValueOf(o)
	for i := range v.NumField() {
		if !v.Field(i).IsZero() {
			set = append(set, v.Type().Field(i).Name)
		}
	}
	return set
}

// TestLabAssemblyDiffersOnlyInItsSubstitutions builds the service as
// production (no options; Plug in a production environment must set
// nothing) and as cmd/coupon's wire does in the lab, with the fixed mode
// and with incident 1's (COUPON_DEDUCTION_MODE=broken). All declare the
// same consumers and jobs, and the lab production's routes and the
// console switch's two; the lab's Options differ from production's zero
// value only in the named fields, and its deducer starts at the mode.
func TestLabAssemblyDiffersOnlyInItsSubstitutions(t *testing.T) {
	fixedCfg := coupontest.Config(t, nil)
	outside := fixedCfg
	outside.Env = platform.EnvProduction
	outside.Modes.Deduction = variant.Broken // refused by Load there; Plug must not act on it either
	var outsideOpts assembly.Options
	couponlab.Plug(&outsideOpts, outside)
	if set := setFields(outsideOpts); len(set) != 0 {
		t.Fatalf("Plug outside lab mode set %v, want nothing", set)
	}

	prod := coupontest.StartWith(t, fixedCfg, assembly.Options{})
	if len(prod.Declared.Routes) == 0 || len(prod.Declared.Consumers) != 2 || len(prod.Declared.Jobs) != 3 {
		t.Fatalf("production declared %+v, want the routes, 2 consumers and 3 jobs", prod.Declared)
	}
	want := prod.Declared
	want.Routes = append(slices.Clone(want.Routes), "GET /admin/lab/deduction", "PUT /admin/lab/deduction")
	slices.Sort(want.Routes)
	for _, mode := range []variant.Mode{variant.Fixed, variant.Broken} {
		cfg := coupontest.Config(t, map[string]string{"COUPON_DEDUCTION_MODE": string(mode)})
		var o assembly.Options
		couponlab.Plug(&o, cfg)
		if set := setFields(o); !slices.Equal(set, plugged) {
			t.Errorf("%s: Plug set %v, want the lab's named substitutions %v", mode, set, plugged)
		}
		if o.Deducer == nil || o.Deducer.Mode() != mode {
			t.Fatalf("%s: the lab's deducer is %v", mode, o.Deducer)
		}
		lab := coupontest.StartWith(t, cfg, o)
		got := lab.Declared
		slices.Sort(got.Routes)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%s: declared:\nproduction and the switch %+v\nlab %+v", mode, want, got)
		}
	}
}
