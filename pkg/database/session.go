package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
)

// setReadCommitted makes READ COMMITTED the isolation of the session's
// transactions (see the package doc for why). The statement is the same on
// MySQL 8 and MariaDB, whose session variables are named differently
// (transaction_isolation, tx_isolation).
const setReadCommitted = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"

// readCommitted is a connector whose connections are READ COMMITTED from
// the start: every connection the pool opens runs setReadCommitted once,
// before the pool hands it out, so no transaction pays a round trip to set
// its isolation.
type readCommitted struct {
	driver.Connector
}

// Connect opens a connection and sets its isolation; a connection whose
// isolation could not be set is closed, never used.
func (c readCommitted) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("driver connection %T cannot run statements", conn)
	}
	if _, err := ex.ExecContext(ctx, setReadCommitted, nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("set the session to READ COMMITTED: %w", err)
	}
	return conn, nil
}

// connector returns the connector of the database/sql driver registered as
// driverName ("mysql", or a wrapper such as pkg/lab/fault's) for dsn.
// sql.Open is how database/sql looks a driver up by name; it opens no
// connection.
func connector(driverName, dsn string) (driver.Connector, error) {
	db, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := db.Driver()
	_ = db.Close()
	if dc, ok := drv.(driver.DriverContext); ok {
		return dc.OpenConnector(dsn)
	}
	return dsnConnector{drv: drv, dsn: dsn}, nil
}

// dsnConnector adapts a driver that has no connectors of its own.
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }
