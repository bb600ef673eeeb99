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
var plugged = []string{"Deducer"}

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

// TestLabAssemblyDiffersOnlyInItsSubstitutions builds the service twice as
// cmd/coupon's wire does: once as production (the fixed mode, and a
// production environment, where Plug must set nothing) and once as the lab
// of incident 1 (COUPON_DEDUCTION_MODE=broken). Both declare the same
// routes, consumers and jobs; the lab's Options differ from production's
// zero value only in the named fields, and its deducer is the broken one.
func TestLabAssemblyDiffersOnlyInItsSubstitutions(t *testing.T) {
	prodCfg := coupontest.Config(t, nil)
	var prodOpts assembly.Options
	couponlab.Plug(&prodOpts, prodCfg)
	if set := setFields(prodOpts); len(set) != 0 {
		t.Fatalf("Plug with the fixed mode set %v, want nothing", set)
	}
	outside := prodCfg
	outside.Env = platform.EnvProduction
	outside.Modes.Deduction = variant.Broken // refused by Load there; Plug must not act on it either
	var outsideOpts assembly.Options
	couponlab.Plug(&outsideOpts, outside)
	if set := setFields(outsideOpts); len(set) != 0 {
		t.Fatalf("Plug outside lab mode set %v, want nothing", set)
	}

	labCfg := coupontest.Config(t, map[string]string{"COUPON_DEDUCTION_MODE": "broken"})
	var labOpts assembly.Options
	couponlab.Plug(&labOpts, labCfg)
	for _, f := range setFields(labOpts) {
		if !slices.Contains(plugged, f) {
			t.Errorf("Plug set Options.%s, which is not one of the lab's named substitutions %v", f, plugged)
		}
	}
	if labOpts.Deducer == nil || labOpts.Deducer.Mode() != variant.Broken {
		t.Fatalf("the lab's deducer is %v, want the broken one", labOpts.Deducer)
	}

	prod := coupontest.StartWith(t, prodCfg, prodOpts)
	lab := coupontest.StartWith(t, labCfg, labOpts)
	if !reflect.DeepEqual(prod.Declared, lab.Declared) {
		t.Fatalf("declared:\nproduction %+v\nlab        %+v", prod.Declared, lab.Declared)
	}
	if len(prod.Declared.Routes) == 0 || len(prod.Declared.Consumers) != 2 || len(prod.Declared.Jobs) != 3 {
		t.Fatalf("production declared %+v, want the routes, 2 consumers and 3 jobs", prod.Declared)
	}
}
