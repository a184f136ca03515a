package hooksql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookrelay/hookrelay/internal/urlcred"
)

// ErrDatabase is wrapped by every failure the database reported (connection
// lost, constraint violated, table missing). The message carries the
// operation and the driver's text with any DSN password removed; no driver
// error type is exposed. Context cancellation is reported as the context's
// error instead.
var ErrDatabase = errors.New("hooksql: database error")

// ErrSchemaTooNew is wrapped by Migrate's error when the database was
// migrated by a newer version of hookrelay than this one: this code would
// misread its tables. Only Migrate checks: Open, New and the other
// operations do not read the schema version, so a process that does not
// call Migrate at start-up should compare Version with SchemaVersion.
var ErrSchemaTooNew = errors.New("hooksql: database schema is newer than this library")

// ErrTxConflict is matched (errors.Is) by the error of a statement run in
// a caller's transaction (EnqueueTx, PublishTx) that the database refused
// for a conflict with another transaction: a deadlock (PostgreSQL 40P01,
// MySQL 1213), a serialization failure (40001), a row changed since the
// transaction's snapshot (MariaDB 1020, under innodb_snapshot_isolation) or
// a lock wait timeout (MySQL 1205, PostgreSQL 55P03 past the session's
// lock_timeout). The transaction is lost: roll it back and run it again;
// run nothing more on it (PostgreSQL has aborted it after any of these).
// After a deadlock or 1020 the
// server has rolled the whole transaction back already (MariaDB treats
// 1020 as a deadlock), and so it has after 1205 when
// innodb_rollback_on_timeout is on: a statement run on it now would run
// outside any transaction.
// After 1205 by default (innodb_rollback_on_timeout off), MySQL and
// MariaDB roll back only the statement that waited: the transaction stays
// open, holding its locks, the caller's earlier writes and, when EnqueueTx
// ran more than one statement, part of its deliveries; committing it would
// store them without the rest. The Store's own transactions are run again
// by the Store (up to four times) before it reports an error, except after
// a lock wait timeout: the server already waited innodb_lock_wait_timeout
// (or lock_timeout).
var ErrTxConflict = errors.New("hooksql: transaction conflict (deadlock, serialization failure or lock wait timeout); run it again")

// ErrInvalidDSN is wrapped by Open's error when the driver cannot read the
// DSN (a malformed URL, an unknown parameter value, a port out of range).
// Nothing was dialed: it is the caller's input, not the database, that is
// wrong, and trying again will not help.
var ErrInvalidDSN = errors.New("hooksql: invalid DSN")

// ErrInvalidOptions is wrapped by the error of New, Open, OpenSQLite and
// Options.Validate when an Options field is out of its range (a malformed
// TablePrefix, a negative size). Nothing was opened or dialed.
var ErrInvalidOptions = errors.New("hooksql: invalid options")

// inputRefusal is the text of a refused input (a DSN's, password removed; an
// Options field's) that is its kind, ErrInvalidDSN or ErrInvalidOptions,
// without the kind's words before it.
type inputRefusal struct {
	text string
	kind error
}

func (e inputRefusal) Error() string        { return e.text }
func (e inputRefusal) Is(target error) bool { return target == e.kind }

func invalidDSN(text string) error     { return inputRefusal{text, ErrInvalidDSN} }
func invalidOptions(text string) error { return inputRefusal{text, ErrInvalidOptions} }

// dbErr translates a driver failure at the Store's boundary.
func (s *Store) dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("hooksql: %s: %w", op, context.Canceled)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("hooksql: %s: %w", op, context.DeadlineExceeded)
	}
	if errors.Is(err, sql.ErrTxDone) {
		// A finished transaction was used: the caller's mistake
		// (EnqueueTx), not a failure of the database.
		return fmt.Errorf("hooksql: %s: %w", op, sql.ErrTxDone)
	}
	e := fmt.Errorf("%w: %s: %s", ErrDatabase, printable(op), printable(redact(err.Error(), s.secrets)))
	if kind := conflictOf(err); kind != noConflict {
		return &txConflict{err: e, kind: kind}
	}
	return e
}

// printable is s with every byte that is not UTF-8 written as \xNN and
// every control character escaped as Go would quote it: an operation names
// the ID it was given, and an error message is one line of text whatever
// that ID holds.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// conflictKind is how a failure lost to another transaction, if it did.
type conflictKind int

const (
	noConflict conflictKind = iota
	// conflictRerun: a deadlock or serialization failure; running the
	// whole transaction again may succeed at once, and the Store does so
	// with its own (retried).
	conflictRerun
	// conflictWaited: a lock wait timeout. It is ErrTxConflict too, but
	// the Store does not run its own transaction again: the server already
	// waited innodb_lock_wait_timeout for the lock, and each run more
	// could wait as long again.
	conflictWaited
)

// conflictOf classifies err: PostgreSQL's serialization failure (40001)
// and deadlock (40P01), and its lock not available (55P03: a wait past the
// session's lock_timeout, a waited conflict like 1205); MySQL's deadlock (1213), MariaDB's "record has
// changed since last read" (1020: a write to a row changed after the
// transaction's snapshot, under innodb_snapshot_isolation, the default
// from MariaDB 11.6), and InnoDB's lock wait timeout (1205).
func conflictOf(err error) conflictKind {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01":
			return conflictRerun
		case "55P03": // lock_not_available: past lock_timeout, or NOWAIT
			return conflictWaited
		}
		return noConflict
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1213, // ER_LOCK_DEADLOCK
			1020: // ER_CHECKREAD
			return conflictRerun
		case 1205: // ER_LOCK_WAIT_TIMEOUT
			return conflictWaited
		}
	}
	return noConflict
}

// isParseError reports MySQL's inputRefusal of a statement it could not parse
// (ER_PARSE_ERROR), which runs nothing and leaves the transaction open.
func isParseError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1064
}

// keywordPassword finds a keyword=value password: quoted, or up to the
// next space, a backslash escaping the next character in either (libpq's
// rules: password='it\'s mine' or password=it\ s).
var keywordPassword = regexp.MustCompile(`(?i)password\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)+)`)

var keywordEscape = regexp.MustCompile(`\\(.)`)

// dsnSecrets extracts the password of a URL, key=value or go-sql-driver
// DSN, so it can be removed from error messages.
func dsnSecrets(dsn string) []string {
	var out []string
	add := func(s string) {
		s = strings.Trim(s, "'")
		if s != "" {
			out = append(out, s, url.QueryEscape(s), url.PathEscape(s))
		}
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			// As the URL spells it: escaping the decoded password again
			// need not give that back (%2f, or %40 with %20 for a space).
			if _, raw, ok := urlcred.Raw(dsn); ok {
				add(raw)
			}
		}
	}
	if cfg, err := mysql.ParseDSN(dsn); err == nil {
		add(cfg.Passwd)
	}
	for _, m := range keywordPassword.FindAllStringSubmatch(dsn, -1) {
		v := m[1]
		if len(v) >= 2 && v[0] == '\'' {
			v = v[1 : len(v)-1]
		}
		add(v)
		add(keywordEscape.ReplaceAllString(v, "$1")) // as the driver read it
	}
	return out
}

// withoutConnString is err's text, but for pgx's inputRefusal of a DSN it
// cannot parse ("cannot parse `<DSN>`: why"), which prints the DSN with
// what pgx could find of its password masked: with a password pgx reads
// differently from its masking (password='it\'s mine'), the rest of the
// password showed. The DSN is left out.
func withoutConnString(err error) string {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if i := strings.LastIndex(msg, "`: "); strings.HasPrefix(msg, "cannot parse `") && i >= 0 {
			return "cannot parse the DSN: " + msg[i+len("`: "):]
		}
		return "cannot parse the DSN"
	}
	return msg
}

func redact(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	return msg
}
