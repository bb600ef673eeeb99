// Package database opens a service's MySQL/MariaDB database through gorm,
// creating the database first when it does not exist, and classifies the
// errors the rest of the code must tell apart (IsDuplicateKey, IsDeadlock,
// IsPermanent, IsUnavailable).
//
// # Isolation
//
// Every connection of a pool Open returns is READ COMMITTED, set once when
// the connection is made, so transactions begin with no statement of their
// own. Under InnoDB's default, REPEATABLE READ, a locking read or an update
// found through an index also locks the gaps between the rows it reads, and
// an insert into such a gap waits: queue-like claims (FOR UPDATE SKIP
// LOCKED) and inserts next to a row being moved deadlock on them. Nothing
// here relies on gap locks or on a repeated read seeing an old snapshot:
// correctness rests on unique keys (the dedup, idempotency and payment
// rows, whose duplicate check locks at any isolation) and on conditional
// updates whose WHERE clause re-reads the latest committed row under its
// lock. READ COMMITTED keeps exactly those record locks, and a second
// read in a transaction sees what committed since the first.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Config is the database part of a service configuration. The database name
// is not here: each service owns its own and passes it to Open.
type Config struct {
	Addr            string        `env:"MYSQL_ADDR" default:"127.0.0.1:3306" usage:"MySQL/MariaDB host:port"`
	User            string        `env:"MYSQL_USER" default:"root" usage:"MySQL user"`
	Password        string        `env:"MYSQL_PASSWORD" default:"" usage:"MySQL password (empty for the local dev server)"`
	MaxOpenConns    int           `env:"MYSQL_MAX_OPEN_CONNS" default:"32" usage:"connection pool size"`
	MaxIdleConns    int           `env:"MYSQL_MAX_IDLE_CONNS" default:"16" usage:"idle connections kept in the pool"`
	ConnMaxLifetime time.Duration `env:"MYSQL_CONN_MAX_LIFETIME" default:"5m" usage:"recycle connections after this long"`

	// DriverName selects a registered database/sql driver other than "mysql",
	// such as the fault-injecting wrapper from pkg/lab/fault. Not read from the
	// environment.
	DriverName string `env:"-"`
}

// DSN returns the go-sql-driver DSN for dbName ("" for no default database).
func (c Config) DSN(dbName string) string {
	mc := mysql.NewConfig()
	mc.Net = "tcp"
	mc.Addr = c.Addr
	mc.User = c.User
	mc.Passwd = c.Password
	mc.DBName = dbName
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.Params = map[string]string{"charset": "utf8mb4"}
	mc.Collation = "utf8mb4_unicode_ci"
	mc.MultiStatements = true
	// Arguments are interpolated client-side (safe with utf8mb4), so a
	// statement with arguments is one round trip instead of three
	// (prepare, execute, close): the outbox relay and the idempotency
	// claim are bound by round trips.
	mc.InterpolateParams = true
	mc.Timeout = 5 * time.Second
	return mc.FormatDSN()
}

// EnsureDatabase creates dbName if it does not exist. A name CheckName
// refuses is refused here too, before it reaches SQL.
func EnsureDatabase(ctx context.Context, cfg Config, dbName string) error {
	if err := checkName(dbName); err != nil {
		return fmt.Errorf("create database %q: %w", dbName, err)
	}
	q := "CREATE DATABASE IF NOT EXISTS " + quoteIdent(dbName) + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
	if err := execWithoutDatabase(ctx, cfg, q); err != nil {
		return fmt.Errorf("create database %s on %s: %w", dbName, cfg.Addr, err)
	}
	return nil
}

// DropDatabase drops dbName if it exists: the end of a throwaway database
// that EnsureDatabase or Open created. It refuses the names EnsureDatabase
// refuses.
func DropDatabase(ctx context.Context, cfg Config, dbName string) error {
	if err := checkName(dbName); err != nil {
		return fmt.Errorf("drop database %q: %w", dbName, err)
	}
	if err := execWithoutDatabase(ctx, cfg, "DROP DATABASE IF EXISTS "+quoteIdent(dbName)); err != nil {
		return fmt.Errorf("drop database %s on %s: %w", dbName, cfg.Addr, err)
	}
	return nil
}

// execWithoutDatabase runs q on cfg's server with no database selected.
func execWithoutDatabase(ctx context.Context, cfg Config, q string) error {
	db, err := sql.Open("mysql", cfg.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, q)
	return err
}

// quoteIdent quotes name as a MySQL identifier. A backtick inside is doubled,
// so no name, whatever got it past validation, can end the identifier and
// append SQL of its own.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// Open creates dbName if needed and returns a pooled gorm handle on it,
// through the driver cfg.DriverName names, every connection READ COMMITTED
// (see the package doc). Slow statements (over 200ms) and errors are logged through log.
func Open(ctx context.Context, cfg Config, dbName string, log *slog.Logger) (*gorm.DB, error) {
	if err := EnsureDatabase(ctx, cfg, dbName); err != nil {
		return nil, err
	}
	driverName := cfg.DriverName
	if driverName == "" {
		driverName = "mysql"
	}
	dsn := cfg.DSN(dbName)
	conns, err := connector(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: driver %s: %w", dbName, driverName, err)
	}
	pool := sql.OpenDB(readCommitted{conns})
	logCfg := logger.Config{SlowThreshold: 200 * time.Millisecond, LogLevel: logger.Warn, IgnoreRecordNotFoundError: true}
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: pool, DSN: dsn}), &gorm.Config{
		Logger:                 newLazyTrace(logger.NewSlogLogger(log, logCfg), logCfg),
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", dbName, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("database %s handle: %w", dbName, err)
	}
	sqlDB.SetMaxOpenConns(cfg.MaxOpenConns)
	sqlDB.SetMaxIdleConns(cfg.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("ping database %s: %w", dbName, err)
	}
	return db, nil
}

// Close closes the pool behind db.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// IsDuplicateKey reports whether err is a unique-key violation (MySQL 1062).
// It is the signal every "insert the unique row" guard in the project relies on.
func IsDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	return errors.Is(err, gorm.ErrDuplicatedKey)
}

// IsDeadlock reports whether err is InnoDB choosing this transaction as a
// deadlock victim (MySQL 1213). The whole transaction has been rolled back,
// so running it again from the start is the expected answer. Concurrent
// inserts of one unique key, for instance after its row was deleted, can
// deadlock this way.
func IsDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// IsPermanent reports whether err is one that no retry heals: a database
// name EnsureDatabase refused, or a MySQL error for refused credentials, a
// refused database, or a statement the server cannot parse. Start-up
// retries stop at once on these, so a misconfigured service exits naming
// the problem instead of waiting out STARTUP_TIMEOUT; errors that waiting
// can fix (connection refused, the server still starting) are not MySQL
// errors and stay retryable.
func IsPermanent(err error) bool {
	if errors.Is(err, errBadName) {
		return true
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1044, // ER_DBACCESS_DENIED_ERROR: no right to create or use the database
		1045, // ER_ACCESS_DENIED_ERROR: wrong user or password
		1064, // ER_PARSE_ERROR: SQL syntax
		1102, // ER_WRONG_DB_NAME
		1698: // ER_ACCESS_DENIED_NO_PASSWORD_ERROR: unknown user (MariaDB), or one that needs another plugin
		return true
	}
	return false
}

// ByKey is db on table for a statement that finds its row by key, the
// primary key or a unique one, with FORCE INDEX (key) so that MariaDB's
// plan reads that key and nothing else.
//
// Every state-machine update here is "WHERE <key> = ? AND status = ?", and
// most tables also have an index that starts with status (for the jobs
// that look for rows in a state). On a small table the optimizer may read
// the row through that status index, and an UPDATE locks what it reads:
// the status entry and the gap before it. Another transaction that then
// inserts a row, or moves a row into that status, waits on the gap; when
// the first waits back on it (an update of the same row, racing), InnoDB
// kills one of the two as a deadlock. Through the key, the update locks the
// row's key entry (on a secondary unique key MariaDB also locks the gap just
// before it, never a status range) and the other waits its turn.
//
// Those gap locks are REPEATABLE READ's; the connections Open makes are READ
// COMMITTED and take none (see the package doc). ByKey keeps a move to its
// row's key at any isolation: in a transaction that asks for REPEATABLE
// READ, or on a pool opened some other way.
func ByKey(db *gorm.DB, table, key string) *gorm.DB {
	return db.Table(table + " FORCE INDEX (" + key + ")")
}
