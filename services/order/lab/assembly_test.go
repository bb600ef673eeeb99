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
// production assembly and the lab's (every mode at a lab variant, the
// options cmd/order's wire() gets from Plug), starts both, and proves that
// they declare the same routes, consumers and jobs, and that the lab's
// options differ from production's zero value in exactly the fields its
// modes name.
func TestLabDiffersFromProductionOnlyInTheNamedSubstitutions(t *testing.T) {
	svc := assembly.Definition(nil)
	start := func(t *testing.T, vars map[string]string) (platform.Declarations, assembly.Options) {
		cfg := svctest.Config(t, svc, vars)
		var o assembly.Options
		lab.Plug(&o, cfg)
		var declared platform.Declarations
		svctest.Start(t, svc, cfg, func(w *platform.Wiring, cfg config.Config) (*assembly.Parts, error) {
			parts, err := assembly.Assemble(w, cfg, o)
			declared = w.Declared()
			return parts, err
		})
		return declared, o
	}
	prod, prodOpts := start(t, nil)
	labDecl, labOpts := start(t, map[string]string{
		"ORDER_IDEMPOTENCY_MODE": "broken", "PRODUCT_COPY_MODE": "orderly", "ORDER_STOCK_MODE": "optimistic", "ORDER_CLOSE_MODE": "broken",
	})
	if len(prod.Routes) == 0 || len(prod.Consumers) != 2 || len(prod.Jobs) == 0 {
		t.Fatalf("production declared %+v: routes, two consumers and jobs expected", prod)
	}
	if !reflect.DeepEqual(prod, labDecl) {
		t.Fatalf("the lab declares\n%+v\nproduction\n%+v", labDecl, prod)
	}
	if set := setFields(prodOpts); len(set) != 0 {
		t.Fatalf("ONCEMALL_ENV=lab with every mode fixed substitutes %v, want nothing", set)
	}
	if set, want := setFields(labOpts), []string{"Charges", "CopyWorkers", "Guard", "Products", "Stock"}; !slices.Equal(set, want) {
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
