package lab_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/lab"
)

// TestLabDiffersFromProductionOnlyInTheNamedSubstitutions builds the
// production assembly (no options) and the lab's (every mode fixed, then
// every mode at a lab variant: the options cmd/order's wire() gets from
// Plug), starts them, and proves that they declare the same consumers and
// jobs, the lab the routes of production and its console switch's two
// more, and that the lab's options differ from production's zero value in
// exactly the fields its modes name and the switch's own.
func TestLabDiffersFromProductionOnlyInTheNamedSubstitutions(t *testing.T) {
	svc := assembly.Definition(nil)
	start := func(t *testing.T, vars map[string]string, plug bool) (platform.Declarations, assembly.Options) {
		cfg := svctest.Config(t, svc, vars)
		var o assembly.Options
		if plug {
			lab.Plug(&o, cfg)
		}
		var declared platform.Declarations
		svctest.Start(t, svc, cfg, func(w *platform.Wiring, cfg config.Config) (*assembly.Parts, error) {
			parts, err := assembly.Assemble(w, cfg, o)
			declared = w.Declared()
			return parts, err
		})
		return declared, o
	}
	prod, _ := start(t, nil, false)
	fixedDecl, fixedOpts := start(t, nil, true)
	labDecl, labOpts := start(t, map[string]string{
		"ORDER_IDEMPOTENCY_MODE": "broken", "PRODUCT_COPY_MODE": "orderly", "ORDER_STOCK_MODE": "optimistic", "ORDER_CLOSE_MODE": "broken",
	}, true)
	if len(prod.Routes) == 0 || len(prod.Consumers) != 2 || len(prod.Jobs) == 0 {
		t.Fatalf("production declared %+v: routes, two consumers and jobs expected", prod)
	}
	want := prod
	want.Routes = append(slices.Clone(prod.Routes), "POST /admin/lab/product-copy", "GET /admin/lab/product-copy/:run")
	slices.Sort(want.Routes)
	for name, d := range map[string]platform.Declarations{"every mode fixed": fixedDecl, "the lab variants": labDecl} {
		slices.Sort(d.Routes)
		if !reflect.DeepEqual(want, d) {
			t.Errorf("the lab with %s declares\n%+v\nproduction and the switch\n%+v", name, d, want)
		}
	}
	if set, want := setFields(fixedOpts), []string{"Lab", "Products"}; !slices.Equal(set, want) {
		t.Fatalf("ONCEMALL_ENV=lab with every mode fixed substitutes %v, want %v (the console's switch)", set, want)
	}
	if set, want := setFields(labOpts), []string{"Charges", "CopyWorkers", "Guard", "Lab", "Products", "Stock"}; !slices.Equal(set, want) {
		t.Fatalf("the lab substitutes %v, want %v", set, want)
	}
}

// TestPlugSetsEachModesOwnField: each mode's lab variant sets its own
// Options field and nothing else.
func TestPlugSetsEachModesOwnField(t *testing.T) {
	for _, c := range []struct {
		modes config.Modes
		want  []string
	}{
		{config.Modes{OrderIdempotency: "broken"}, []string{"Guard"}},
		{config.Modes{ProductCopy: "broken"}, []string{"Products"}},
		{config.Modes{ProductCopy: lab.Orderly}, []string{"CopyWorkers", "Products"}},
		{config.Modes{Stock: "broken"}, []string{"Stock"}},
		{config.Modes{Stock: lab.Optimistic}, []string{"Stock"}},
		{config.Modes{Close: "broken"}, []string{"Charges"}},
		{config.Modes{Numbering: "broken"}, []string{"Numbers"}},
	} {
		if got := setFields(lab.Variants(c.modes)); !slices.Equal(got, c.want) {
			t.Errorf("%+v sets %v, want %v", c.modes, got, c.want)
		}
	}
	if o := lab.Variants(config.Modes{ProductCopy: lab.Orderly}); o.CopyWorkers != 1 {
		t.Errorf("orderly runs %d copy workers, want 1", o.CopyWorkers)
	}
	// Outside the lab Plug substitutes nothing, whatever the modes say.
	var o assembly.Options
	lab.Plug(&o, config.Config{Modes: config.Modes{Stock: "broken", Close: "broken"}})
	if set := setFields(o); len(set) != 0 {
		t.Fatalf("outside the lab Plug set %v", set)
	}
}

// setFields lists the names of o's fields that are not their zero value,
// sorted.
func setFields(o assembly.Options) []string {
	var set []string
	v := reflect.ValueOf(o)
	for i := range v.NumField() {
		if !v.Field(i).IsZero() {
			set = append(set, v.Type().Field(i).Name)
		}
	}
	slices.Sort(set)
	return set
}
