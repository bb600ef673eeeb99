package migrate

import (
	"strings"
	"testing"
)

func TestLockNameFitsMySQL(t *testing.T) {
	long := strings.Repeat("d", 64)
	if n := len(lockName(long)); n > 64 {
		t.Fatalf("lock name for a 64-character database is %d characters; MySQL allows 64", n)
	}
	if lockName("oncemall_order") != "migrate:oncemall_order" {
		t.Fatalf("short names are kept whole: %q", lockName("oncemall_order"))
	}
	if lockName(long) == lockName(strings.Repeat("e", 64)) {
		t.Fatal("different long names share a lock name")
	}
}
