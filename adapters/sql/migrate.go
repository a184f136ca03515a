package hooksql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// SchemaVersion is the schema version this library writes and reads.
// Migrate brings a database up to it and refuses a newer one. Versions need
// not be contiguous: Migrate applies every embedded step the database has
// not recorded, also one numbered below the database's highest (a step
// merged later from a parallel line of work).
const SchemaVersion = 12

//go:embed migrations
var migrationFiles embed.FS

// migration is one embedded, versioned step of the schema, for one dialect.
type migration struct {
	version int
	name    string
	stmts   []string
}

func (d Dialect) migrationDir() string {
	return path.Join("migrations", string(d))
}

// migrations returns the dialect's steps in version order with the table
// prefix bound. Files are named NNNN_description.sql; statements end with
// ";" at the end of a line; lines starting with "--" are comments.
func (s *Store) migrations() ([]migration, error) {
	dir := s.dialect.migrationDir()
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("hooksql: read embedded migrations: %w", err)
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("hooksql: embedded migration %s: name must be NNNN_description.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("hooksql: read embedded migration %s: %w", e.Name(), err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		m := migration{version: v, name: e.Name()}
		for _, st := range strings.Split(strings.Join(lines, "\n"), ";\n") {
			if st = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(st), ";")); st != "" {
				m.stmts = append(m.stmts, strings.ReplaceAll(st, "{p}", s.prefix))
			}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Migrate creates or upgrades the Store's tables to SchemaVersion with the
// embedded migrations. Running it again is a no-op; several processes may
// run it at once (a database lock serializes them; on PostgreSQL Migrate's
// transaction is READ COMMITTED whatever default_transaction_isolation
// says, so each sees what the one before it committed). A database at a newer
// version than SchemaVersion is refused with an error wrapping
// ErrSchemaTooNew and left untouched. On PostgreSQL and SQLite each step is
// transactional; MariaDB and MySQL commit DDL implicitly, so there every
// statement is re-runnable (CREATE TABLE IF NOT EXISTS, and an ALTER TABLE
// … ADD COLUMN or CREATE INDEX is skipped when information_schema shows
// the column or index exists) and a step interrupted there completes on
// the next Migrate. The MySQL migrations use no MariaDB-only syntax, so
// they run on MariaDB 10.6+ and MySQL 8.0.13+ alike.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := s.migrations()
	if err != nil {
		return err
	}
	switch s.dialect {
	case MySQL:
		return s.migrateMySQL(ctx, ms)
	default:
		return s.inTx(ctx, "migrate", func(q querier) error {
			if s.dialect == Postgres {
				// Each statement after the migration lock must see what the
				// process that held it before committed. Under a REPEATABLE
				// READ or SERIALIZABLE default (default_transaction_isolation)
				// the snapshot would be taken by the lock statement, before
				// it waits, and the steps the other process applied
				// meanwhile would be applied again.
				if _, err := q.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
					return s.dbErr("migrate: isolation", err)
				}
				h := fnv.New64a()
				h.Write([]byte("hookrelay migrate " + s.prefix))
				if _, err := q.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
					return s.dbErr("migrate: lock", err)
				}
			}
			return s.applyMigrations(ctx, q, ms)
		})
	}
}

// mysqlLockWait is how many seconds one GET_LOCK of migrateMySQL waits
// before ctx is looked at again; a variable for tests.
var mysqlLockWait = 5

// migrateMySQL holds a named lock on one connection while it migrates.
func (s *Store) migrateMySQL(ctx context.Context, ms []migration) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.dbErr("migrate", err)
	}
	defer conn.Close()
	lock := "hookrelay_migrate_" + s.prefix
	// Waited for as long as ctx allows, as PostgreSQL's advisory lock is:
	// another process's migration (an index on a large deliveries table)
	// can take longer than any fixed wait, and a process started meanwhile
	// gave up after 60 s with an error. GET_LOCK is asked again every
	// mysqlLockWait seconds, so that ctx is looked at between waits.
	for {
		var got sql.NullInt64
		err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", lock, mysqlLockWait).Scan(&got)
		if err == nil && got.Valid && got.Int64 == 1 {
			break // held now, whatever ctx says: released below
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w: migrate: waiting for lock %s held by another migration: %w", ErrDatabase, lock, cerr)
		}
		if err != nil {
			return s.dbErr("migrate: lock", err)
		}
		if !got.Valid {
			return fmt.Errorf("%w: migrate: lock %s could not be taken", ErrDatabase, lock)
		}
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lock) //nolint:errcheck // the lock also ends with the session
	return s.applyMigrations(ctx, conn, ms)
}

func (s *Store) applyMigrations(ctx context.Context, q querier, ms []migration) error {
	if _, err := q.ExecContext(ctx, s.q(`CREATE TABLE IF NOT EXISTS {m} (version INTEGER NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL)`)); err != nil {
		return s.dbErr("migrate: create schema_migrations", err)
	}
	current, err := s.schemaVersion(ctx, q)
	if err != nil {
		return err
	}
	if current > SchemaVersion {
		return fmt.Errorf("%w: tables %s* are at version %d, this library knows versions up to %d; upgrade hookrelay",
			ErrSchemaTooNew, s.prefix, current, SchemaVersion)
	}
	applied, err := s.appliedVersions(ctx, q)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		for _, st := range m.stmts {
			if s.dialect == MySQL {
				done, err := s.mysqlDone(ctx, q, st)
				if err != nil {
					return s.dbErr("migrate: "+m.name, err)
				}
				if done {
					continue
				}
			}
			if _, err := q.ExecContext(ctx, st); err != nil && !s.alreadyApplied(err) {
				return s.dbErr("migrate: "+m.name, err)
			}
		}
		if _, err := q.ExecContext(ctx, s.q(`INSERT INTO {m} (version, name) VALUES (?, ?)`), m.version, m.name); err != nil {
			return s.dbErr("migrate: record "+m.name, err)
		}
	}
	return nil
}

// MySQL statements Migrate skips when their effect is already there.
var (
	mysqlAddColumn   = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)\s`)
	mysqlCreateIndex = regexp.MustCompile(`(?is)^CREATE\s+INDEX\s+(\w+)\s+ON\s+(\w+)\s`)
)

// mysqlDone reports whether a MySQL migration statement's column or index
// already exists: the portable stand-in for ADD COLUMN IF NOT EXISTS and
// CREATE INDEX IF NOT EXISTS, which MySQL 8 lacks.
func (s *Store) mysqlDone(ctx context.Context, q querier, stmt string) (bool, error) {
	var query, table, name string
	if m := mysqlAddColumn.FindStringSubmatch(stmt); m != nil {
		query, table, name = `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?`, m[1], m[2]
	} else if m := mysqlCreateIndex.FindStringSubmatch(stmt); m != nil {
		query, table, name = `SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?`, m[2], m[1]
	} else {
		return false, nil
	}
	var n int
	if err := q.QueryRowContext(ctx, query, table, name).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// appliedVersions returns the versions recorded in schema_migrations.
func (s *Store) appliedVersions(ctx context.Context, q querier) (map[int]bool, error) {
	rows, err := q.QueryContext(ctx, s.q(`SELECT version FROM {m}`))
	if err != nil {
		return nil, s.dbErr("schema versions", err)
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, s.dbErr("schema versions", err)
		}
		out[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("schema versions", err)
	}
	return out, nil
}

// alreadyApplied reports a MySQL error that says a re-run statement's
// change is already there: MySQL 8 has no ADD COLUMN IF NOT EXISTS nor
// CREATE INDEX IF NOT EXISTS, and it commits DDL at once, so a step
// interrupted after one of them re-runs it.
func (s *Store) alreadyApplied(err error) bool {
	var me *mysql.MySQLError
	return s.dialect == MySQL && errors.As(err, &me) && (me.Number == 1060 || me.Number == 1061) // ER_DUP_FIELDNAME, ER_DUP_KEYNAME
}

func (s *Store) schemaVersion(ctx context.Context, q querier) (int, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, s.q(`SELECT MAX(version) FROM {m}`)).Scan(&v); err != nil {
		return 0, s.dbErr("schema version", err)
	}
	return int(v.Int64), nil
}

// Version returns the schema version the database is at: 0 before the first
// Migrate, SchemaVersion after it.
func (s *Store) Version(ctx context.Context) (int, error) {
	var exists bool
	var err error
	switch s.dialect {
	case SQLite:
		err = s.db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?`, s.prefix+"schema_migrations").Scan(&exists)
	case Postgres:
		err = s.db.QueryRowContext(ctx, `SELECT to_regclass($1::text) IS NOT NULL`, s.prefix+"schema_migrations").Scan(&exists)
	case MySQL:
		err = s.db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, s.prefix+"schema_migrations").Scan(&exists)
	}
	if err != nil {
		return 0, s.dbErr("schema version", err)
	}
	if !exists {
		return 0, nil
	}
	return s.schemaVersion(ctx, s.db)
}
