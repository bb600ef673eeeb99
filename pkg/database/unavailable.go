package database

import (
	"database/sql/driver"
	"errors"
	"net"
	"os"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// IsUnavailable reports whether err says the server could not be reached or
// the connection to it broke, rather than that the server refused a
// statement: whatever the statement was, it may succeed once the server
// answers again, and nothing about it was at fault. It is what a consumer
// pauses on instead of spending a delivery attempt (pkg/inbox).
//
// Unavailable:
//   - a network error on the way to the server: connection refused or
//     reset, a broken pipe, an unreachable host, a name that does not
//     resolve, an I/O deadline of the connection (any *net.OpError, and
//     the syscall errors and os.ErrDeadlineExceeded under it);
//   - the driver's own signals of a dead connection: driver.ErrBadConn
//     and mysql.ErrInvalidConn (the connection broke mid-statement: a
//     COMMIT may have been applied, so only an idempotent retry is safe);
//   - MySQL errors that end a session rather than a statement: too many
//     connections (1040), server shutting down (1053), connection killed
//     (1927 MariaDB, 3169 MySQL), disconnected for inactivity (4031), the
//     server's network read and write errors (1158–1161), and the client
//     codes a proxy may forward (2002, 2003, 2006 server gone, 2013 lost
//     during a query).
//
// Not unavailable: everything the server answered about the statement (a
// duplicate or foreign key, a lock wait timeout, a deadlock, a syntax
// error, a missing table, a refused login), a query killed by an operator
// (1317), and an ended context. A context deadline is the caller's budget
// running out: MySQL hanging and a statement waiting on a lock look the
// same from here, so a caller that gave MySQL a deadline asks the server
// (a ping with its own deadline) to tell them apart, as pkg/inbox does.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var oe *net.OpError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &oe),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &me):
		switch me.Number {
		case 1040, // ER_CON_COUNT_ERROR: too many connections
			1053,                   // ER_SERVER_SHUTDOWN
			1158, 1159, 1160, 1161, // ER_NET_READ_ERROR … ER_NET_WRITE_INTERRUPTED
			1927,                   // ER_CONNECTION_KILLED (MariaDB)
			3169,                   // ER_SESSION_WAS_KILLED (MySQL)
			4031,                   // ER_CLIENT_INTERACTION_TIMEOUT (MySQL)
			2002, 2003, 2006, 2013: // CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR, CR_SERVER_GONE_ERROR, CR_SERVER_LOST
			return true
		}
	}
	return false
}
