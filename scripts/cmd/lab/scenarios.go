package main

import (
	pkglab "github.com/oncemall/oncemall/pkg/lab"
)

// all lists every incident's scenarios, in incident order.
func all() []pkglab.Scenario {
	var out []pkglab.Scenario
	return out
}
