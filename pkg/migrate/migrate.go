// Package migrate applies versioned SQL migrations embedded in the binary.
//
// A source is a directory of files named NNNNNN_name.up.sql and
// NNNNNN_name.down.sql. Several sources can share one database: a service has
// its own, and reusable packages (outbox, inbox, idempotency) ship theirs. The
// applied versions are kept per source in the table schema_migrations, and a
// MySQL named lock serialises concurrent runners (several replicas starting at
// once).
//
// MySQL commits DDL implicitly, so a migration and its schema_migrations row
// cannot share a transaction: a process killed between the two leaves the
// migration applied but unrecorded, and the next run fails on it. Write
// migrations that fail loudly in that case (plain CREATE TABLE rather than
// CREATE TABLE IF NOT EXISTS) and repair by hand.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Source is one named set of migrations.
type Source struct {
	// Name identifies the set in schema_migrations, e.g. "order" or "outbox".
	Name string
	// FS holds the migration files at its root.
	FS fs.FS
}

// Migration is one version of a source.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

const lockTimeout = 60 // seconds

const createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
  source     VARCHAR(64)  NOT NULL,
  version    INT          NOT NULL,
  name       VARCHAR(255) NOT NULL,
  applied_at DATETIME(3)  NOT NULL,
  PRIMARY KEY (source, version)
) ENGINE=InnoDB`

// Load reads and orders the migrations of src.
func Load(src Source) ([]Migration, error) {
	entries, err := fs.ReadDir(src.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations %s: %w", src.Name, err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		name := e.Name()
		var dir string
		switch {
		case strings.HasSuffix(name, ".up.sql"):
			dir = "up"
		case strings.HasSuffix(name, ".down.sql"):
			dir = "down"
		default:
			continue
		}
		num, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s/%s: name must be NNNNNN_name.%s.sql", src.Name, name, dir)
		}
		body, err := fs.ReadFile(src.FS, path.Clean(name))
		if err != nil {
			return nil, err
		}
		m := byVersion[v]
		if m == nil {
			m = &Migration{Version: v, Name: strings.TrimSuffix(rest, "."+dir+".sql")}
			byVersion[v] = m
		}
		if dir == "up" {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" {
			return nil, fmt.Errorf("migration %s/%06d_%s: missing .up.sql", src.Name, m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Up applies every migration of every source that is not applied yet, in
// order. The connection must allow multi-statement execution.
func Up(ctx context.Context, db *sql.DB, sources ...Source) error {
	return withLock(ctx, db, func(conn *sql.Conn) error {
		for _, src := range sources {
			migs, err := Load(src)
			if err != nil {
				return err
			}
			applied, err := appliedVersions(ctx, conn, src.Name)
			if err != nil {
				return err
			}
			for _, m := range migs {
				if applied[m.Version] {
					continue
				}
				if _, err := conn.ExecContext(ctx, m.Up); err != nil {
					return fmt.Errorf("apply migration %s/%06d_%s: %w", src.Name, m.Version, m.Name, err)
				}
				if _, err := conn.ExecContext(ctx,
					"INSERT INTO schema_migrations (source, version, name, applied_at) VALUES (?, ?, ?, ?)",
					src.Name, m.Version, m.Name, time.Now().UTC()); err != nil {
					return fmt.Errorf("record migration %s/%06d: %w", src.Name, m.Version, err)
				}
			}
		}
		return nil
	})
}

// Down reverts the last steps applied migrations of src.
func Down(ctx context.Context, db *sql.DB, src Source, steps int) error {
	return withLock(ctx, db, func(conn *sql.Conn) error {
		migs, err := Load(src)
		if err != nil {
			return err
		}
		applied, err := appliedVersions(ctx, conn, src.Name)
		if err != nil {
			return err
		}
		for i := len(migs) - 1; i >= 0 && steps > 0; i-- {
			m := migs[i]
			if !applied[m.Version] {
				continue
			}
			if m.Down == "" {
				return fmt.Errorf("migration %s/%06d_%s has no .down.sql", src.Name, m.Version, m.Name)
			}
			if _, err := conn.ExecContext(ctx, m.Down); err != nil {
				return fmt.Errorf("revert migration %s/%06d_%s: %w", src.Name, m.Version, m.Name, err)
			}
			if _, err := conn.ExecContext(ctx, "DELETE FROM schema_migrations WHERE source = ? AND version = ?", src.Name, m.Version); err != nil {
				return err
			}
			steps--
		}
		return nil
	})
}

func appliedVersions(ctx context.Context, conn *sql.Conn, source string) (map[int]bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT version FROM schema_migrations WHERE source = ?", source)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}

// withLock runs fn on one connection holding a MySQL named lock scoped to the
// current database, so two replicas never apply the same migration twice.
func withLock(ctx context.Context, db *sql.DB, fn func(*sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	var dbName sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return fmt.Errorf("migrate: current database: %w", err)
	}
	if !dbName.Valid || dbName.String == "" {
		return errors.New("migrate: the connection has no database selected")
	}
	name := lockName(dbName.String)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, lockTimeout).Scan(&got); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("migrate: another runner held the migration lock for %ds", lockTimeout)
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", name); rerr != nil && err == nil {
			err = fmt.Errorf("migrate: release lock: %w", rerr)
		}
	}()
	if _, err := conn.ExecContext(ctx, createTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	return fn(conn)
}

// lockName derives the named lock for a database. MySQL refuses lock names
// longer than 64 characters and a database name may be 64 long, so long
// names are cut; two databases sharing a 56-character prefix then merely
// take turns.
func lockName(dbName string) string {
	const prefix = "migrate:"
	if len(dbName) > 64-len(prefix) {
		dbName = dbName[:64-len(prefix)]
	}
	return prefix + dbName
}
