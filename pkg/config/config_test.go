package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/config"
)

type inner struct {
	Addr string `env:"T_ADDR" default:"127.0.0.1:1" usage:"an address"`
}

type sample struct {
	Inner    inner
	Name     string        `env:"T_NAME" default:"svc" usage:"the name"`
	On       bool          `env:"T_ON" default:"true"`
	N        int           `env:"T_N" default:"7"`
	Big      int64         `env:"T_BIG" default:"1048576"`
	Ratio    float64       `env:"T_RATIO" default:"0.5"`
	Wait     time.Duration `env:"T_WAIT" default:"5s"`
	List     []string      `env:"T_LIST" default:"a,b"`
	NoDef    string        `env:"T_NODEF"`
	CodeOnly string        `env:"-"`
	At       time.Time
	hidden   string // unexported: the loader leaves it alone
}

func lookup(m map[string]string) config.LookupFunc {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadDefaults(t *testing.T) {
	c := sample{hidden: "kept"}
	if err := config.LoadFrom(&c, lookup(nil)); err != nil {
		t.Fatal(err)
	}
	want := sample{Inner: inner{Addr: "127.0.0.1:1"}, Name: "svc", On: true, N: 7, Big: 1 << 20, Ratio: 0.5, Wait: 5 * time.Second, List: []string{"a", "b"}, hidden: "kept"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestLoadParsesEveryType(t *testing.T) {
	var c sample
	err := config.LoadFrom(&c, lookup(map[string]string{
		"T_ADDR": "db:3306", "T_NAME": "x", "T_ON": "false", "T_N": "-3", "T_BIG": "9000000000",
		"T_RATIO": "2.25", "T_WAIT": "150ms", "T_LIST": " p , ,q ", "T_NODEF": "set", "-": "never read",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := sample{Inner: inner{Addr: "db:3306"}, Name: "x", On: false, N: -3, Big: 9000000000, Ratio: 2.25, Wait: 150 * time.Millisecond, List: []string{"p", "q"}, NoDef: "set"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed:\n got %+v\nwant %+v", c, want)
	}
}

// An explicitly empty value is the value, not a request for the default:
// an empty string stays empty, and an empty number is an error naming the
// variable. Only a variable that is not set takes its default.
func TestLoadEmptyValueIsTheValue(t *testing.T) {
	var c sample
	if err := config.LoadFrom(&c, lookup(map[string]string{"T_NAME": ""})); err != nil {
		t.Fatal(err)
	}
	if c.Name != "" {
		t.Fatalf("T_NAME set empty: got %q, want empty (not the default)", c.Name)
	}
	if c.N != 7 {
		t.Fatalf("T_N not set: got %d, want the default 7", c.N)
	}
	err := config.LoadFrom(&c, lookup(map[string]string{"T_N": ""}))
	if err == nil || !strings.Contains(err.Error(), "T_N") {
		t.Fatalf("T_N set empty: %v, want an error naming T_N", err)
	}
}

func TestLoadErrorsNameEveryBadVariable(t *testing.T) {
	var c sample
	err := config.LoadFrom(&c, lookup(map[string]string{"T_N": "x", "T_WAIT": "5", "T_ON": "maybe", "T_RATIO": "half", "T_BIG": "1e9"}))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, name := range []string{"T_N", "T_WAIT", "T_ON", "T_RATIO", "T_BIG"} {
		if !strings.Contains(err.Error(), name+"=") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Var == "" {
		t.Fatalf("error is not a *config.Error: %#v", err)
	}
}

func TestLoadRejectsNonPointer(t *testing.T) {
	if err := config.LoadFrom(sample{}, lookup(nil)); err == nil {
		t.Fatal("want an error for a non-pointer destination")
	}
}

func TestLoadReadsProcessEnvironment(t *testing.T) {
	t.Setenv("T_NAME", "from-env")
	var c sample
	if err := config.Load(&c); err != nil {
		t.Fatal(err)
	}
	if c.Name != "from-env" {
		t.Fatalf("T_NAME: got %q", c.Name)
	}
}

func TestVarsListsReadVariablesInOrder(t *testing.T) {
	got := config.Vars(&sample{})
	var names []string
	for _, v := range got {
		names = append(names, v.Name)
	}
	want := []string{"T_ADDR", "T_NAME", "T_ON", "T_N", "T_BIG", "T_RATIO", "T_WAIT", "T_LIST", "T_NODEF"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("Vars names: got %v, want %v", names, want)
	}
	if got[0] != (config.Var{Name: "T_ADDR", Default: "127.0.0.1:1", Usage: "an address"}) {
		t.Fatalf("Vars[0] = %+v", got[0])
	}
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{{":8081", true}, {"127.0.0.1:3306", true}, {"mysql:3306", true}, {":abc", false}, {"8081", false}, {":0", false}, {":70000", false}, {"", false}} {
		err := config.CheckAddr("X_ADDR", tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "X_ADDR") {
			t.Errorf("CheckAddr error does not name the variable: %v", err)
		}
	}
	if err := config.CheckPositive("X_N", 0); err == nil || !strings.Contains(err.Error(), "X_N") {
		t.Errorf("CheckPositive(0) = %v", err)
	}
	if err := config.CheckPositive("X_D", time.Second); err != nil {
		t.Errorf("CheckPositive(1s) = %v", err)
	}
	for _, tc := range []struct {
		n  int
		ok bool
	}{{-1, false}, {0, true}, {10, true}, {11, false}} {
		err := config.CheckRange("X_COUNT", tc.n, 0, 10)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRange(%d, 0, 10) = %v, want ok=%v", tc.n, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "X_COUNT") || !strings.Contains(err.Error(), "from 0 to 10")) {
			t.Errorf("CheckRange error does not name the variable and the bounds: %v", err)
		}
	}
	if err := config.CheckOneOf("X_MODE", "broken", "fixed", "broken"); err != nil {
		t.Errorf("CheckOneOf(broken) = %v", err)
	}
	if err := config.CheckOneOf("X_MODE", "other", "fixed", "broken"); err == nil || !strings.Contains(err.Error(), "X_MODE") {
		t.Errorf("CheckOneOf(other) = %v", err)
	}
	if err := config.CheckNotEmpty("X_SECRET", ""); err == nil || !strings.Contains(err.Error(), "X_SECRET") {
		t.Errorf("CheckNotEmpty(\"\") = %v", err)
	}
	if err := config.CheckNotEmpty("X_SECRET", "s"); err != nil {
		t.Errorf("CheckNotEmpty(s) = %v", err)
	}
}

// validated is a configuration whose Validate refuses an empty V_NAME.
type validated struct {
	Name string `env:"V_NAME" default:"" usage:"a name"`
}

func (v validated) Validate() error { return config.CheckNotEmpty("V_NAME", v.Name) }

func TestLoadValidLoadsThenValidates(t *testing.T) {
	if _, err := config.LoadValid[validated](); err == nil || !strings.Contains(err.Error(), "V_NAME") {
		t.Fatalf("without V_NAME: %v, want the validation error", err)
	}
	t.Setenv("V_NAME", "set")
	c, err := config.LoadValid[validated]()
	if err != nil || c.Name != "set" {
		t.Fatalf("with V_NAME: %+v %v", c, err)
	}
}
