package config

import (
	"fmt"
	"net"
	"strconv"

	"github.com/robfig/cron/v3"
)

// CheckAddr reports whether addr is a usable listen or dial address
// ("host:port" or ":port" with a port from 1 to 65535), naming the variable
// in the error.
func CheckAddr(varName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &Error{Var: varName, Value: addr, Err: fmt.Errorf("not a host:port address")}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return &Error{Var: varName, Value: addr, Err: fmt.Errorf("port must be a number from 1 to 65535")}
	}
	return nil
}

// CheckPositive reports whether n > 0, naming the variable in the error.
func CheckPositive[T ~int | ~int64 | ~float64](varName string, n T) error {
	if n <= 0 {
		return &Error{Var: varName, Value: fmt.Sprint(n), Err: fmt.Errorf("must be greater than zero")}
	}
	return nil
}

// CheckRange reports whether lo <= n <= hi, naming the variable in the error.
func CheckRange[T ~int | ~int64 | ~float64](varName string, n, lo, hi T) error {
	if n < lo || n > hi {
		return &Error{Var: varName, Value: fmt.Sprint(n), Err: fmt.Errorf("must be from %v to %v", lo, hi)}
	}
	return nil
}

// CheckOneOf reports whether v is one of allowed, naming the variable in the
// error. T is any string type, so a typed mode list is passed as it is.
func CheckOneOf[T ~string](varName string, v T, allowed ...T) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return &Error{Var: varName, Value: string(v), Err: fmt.Errorf("must be one of %v", allowed)}
}

// CheckNotEmpty reports whether v is set, naming the variable in the error.
func CheckNotEmpty(varName, v string) error {
	if v == "" {
		return &Error{Var: varName, Err: fmt.Errorf("must not be empty")}
	}
	return nil
}

// CheckSchedule reports a robfig/cron spec ("@every 2s", "0 3 * * *") that
// the platform's scheduler would refuse at start-up, naming the variable.
func CheckSchedule(varName, spec string) error {
	if _, err := cron.ParseStandard(spec); err != nil {
		return &Error{Var: varName, Value: spec, Err: err}
	}
	return nil
}
