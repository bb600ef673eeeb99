// Package config loads a service's configuration from environment variables.
//
// A configuration is a plain struct whose fields carry an `env` tag with the
// variable's name and an optional `default` tag. Nested structs are walked, so
// shared pieces (database, NATS, Redis) are declared once and embedded by every
// service. Supported field types: string, bool, int, int64, float64,
// time.Duration and []string (comma separated).
//
//	type Config struct {
//		Addr    string        `env:"EXAMPLE_ADDR" default:":8080" usage:"listen address"`
//		Timeout time.Duration `env:"EXAMPLE_TIMEOUT" default:"5s"`
//	}
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// LookupFunc returns the value of an environment variable and whether it is set.
// os.LookupEnv is the production implementation; tests pass a map lookup.
type LookupFunc func(name string) (string, bool)

// Var describes one environment variable a configuration reads.
type Var struct {
	Name    string
	Default string
	Usage   string
}

// Error reports a variable whose value could not be used. Its message always
// names the variable, so an operator knows what to fix.
type Error struct {
	Var   string
	Value string
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("config: %s=%q: %v", e.Var, e.Value, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Load fills dst, a pointer to a struct, from the process environment.
func Load(dst any) error {
	return LoadFrom(dst, os.LookupEnv)
}

// LoadValid reads a T from the process environment and validates it: the
// whole of a service's config.Load.
func LoadValid[T interface{ Validate() error }]() (T, error) {
	var c T
	if err := Load(&c); err != nil {
		var zero T
		return zero, err
	}
	return c, c.Validate()
}

// LoadFrom fills dst from lookup. A variable that is not set takes its
// default; one that is set takes its value, even an empty one, so that
// ADMIN_TOKEN="" means an empty token (which the service then refuses)
// and not, silently, the published development token. Every malformed
// variable is reported, joined into one error, so a bad deployment is fixed
// in one round.
func LoadFrom(dst any, lookup LookupFunc) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return errors.New("config: destination must be a pointer to a struct")
	}
	var errs []error
	walk(v.Elem(), func(f reflect.Value, sf reflect.StructField) {
		name := sf.Tag.Get("env")
		raw, ok := lookup(name)
		if !ok {
			raw, ok = sf.Tag.Lookup("default")
			if !ok {
				return
			}
		}
		if err := set(f, raw); err != nil {
			errs = append(errs, &Error{Var: name, Value: raw, Err: err})
		}
	})
	return errors.Join(errs...)
}

// Vars lists the environment variables cfg reads, in declaration order. It
// feeds the README's configuration table and the compose drift test.
func Vars(cfg any) []Var {
	var out []Var
	walk(reflect.ValueOf(cfg).Elem(), func(_ reflect.Value, sf reflect.StructField) {
		out = append(out, Var{Name: sf.Tag.Get("env"), Default: sf.Tag.Get("default"), Usage: sf.Tag.Get("usage")})
	})
	return out
}

func walk(v reflect.Value, visit func(reflect.Value, reflect.StructField)) {
	t := v.Type()
	for i := range t.NumField() {
		sf, f := t.Field(i), v.Field(i)
		if !sf.IsExported() {
			continue
		}
		if name, ok := sf.Tag.Lookup("env"); ok {
			// `env:"-"` marks a field set in code only (a test hook, a driver
			// name): it is neither read nor listed.
			if name != "-" && name != "" {
				visit(f, sf)
			}
			continue
		}
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Time]() {
			walk(f, visit)
		}
	}
}

func set(f reflect.Value, raw string) error {
	switch f.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return errors.New("not a duration (e.g. 500ms, 5s, 1m)")
		}
		f.SetInt(int64(d))
		return nil
	case []string:
		var parts []string
		for p := range strings.SplitSeq(raw, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.Set(reflect.ValueOf(parts))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("not a boolean (true or false)")
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return errors.New("not an integer")
		}
		f.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return errors.New("not a number")
		}
		f.SetFloat(x)
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}
