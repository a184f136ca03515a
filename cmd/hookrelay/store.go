package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/hookrelay/hookrelay"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
	"github.com/hookrelay/hookrelay/internal/sqlitefile"
)

// globals are the flags every command accepts, and the streams.
type globals struct {
	dsn    string
	prefix string
	json   bool

	stdout, stderr io.Writer
	getenv         func(string) string
	// tty says stderr is a terminal: redrive progress is then one line
	// rewritten in place.
	tty bool
	// progressOpen says a terminal progress line awaits its newline.
	progressOpen bool
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// flagSet returns a flag set with the global flags registered on g.
func (g *globals) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.dsn, "dsn", g.dsn, "SQLite path, postgres:// URL or mysql:// URL")
	fs.StringVar(&g.prefix, "table-prefix", g.prefix, "table prefix")
	fs.BoolVar(&g.json, "json", g.json, "machine-readable output")
	return fs
}

// parse parses flags interleaved with positional arguments and checks the
// positional count (-1: any).
func parse(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fail(exitUsage, "%s: %w", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if want >= 0 && len(pos) != want {
		if want == 1 {
			return nil, fail(exitUsage, "%s: needs exactly one ID argument", fs.Name())
		}
		return nil, fail(exitUsage, "%s: unexpected arguments %q", fs.Name(), pos)
	}
	return pos, nil
}

// access says what a command does with the database.
type access int

const (
	// accessMigrate may create the database (a new SQLite file).
	accessMigrate access = iota
	// accessWrite changes an existing database.
	accessWrite
	// accessRead only reads an existing database: a SQLite file is opened
	// read-only, so a read can neither create nor change it.
	accessRead
)

// openStore opens the database named by --dsn. Only migrate may create a
// SQLite file; other commands on a path with no file say "no database
// here". A DSN that cannot be read is exit status 2, other failures 3.
func (g *globals) openStore(ctx context.Context, mode access) (*hooksql.Store, error) {
	needSchema := mode != accessMigrate
	if g.dsn == "" {
		return nil, fail(exitUsage, "--dsn (or $HOOKRELAY_DSN) is required")
	}
	dialect, dsn, err := parseDSN(g.dsn)
	if err != nil {
		return nil, fail(exitUsage, "--dsn: %v", err)
	}
	opts := hooksql.Options{TablePrefix: g.prefix}
	if err := opts.Validate(); err != nil {
		return nil, fail(exitUsage, "--table-prefix: %v", err)
	}
	if dialect == hooksql.SQLite && (dsn == "" || dsn == ":memory:") {
		return nil, fail(exitUsage, "--dsn: an in-memory SQLite database holds nothing to operate on and would vanish with the command; give a file path")
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// interrupted reports an operator's Ctrl-C (the parent's end, not the
	// 15 s bound) as such, not as a database that could not be reached.
	interrupted := func() error {
		return fail(exitFailed, "interrupted before the %s database answered", dialect)
	}
	var s *hooksql.Store
	switch {
	case dialect == hooksql.SQLite && mode != accessMigrate:
		if strings.ContainsAny(dsn, "?#") {
			return nil, fail(exitUsage, "--dsn: a SQLite path must not contain '?' or '#'")
		}
		if _, err := os.Stat(dsn); errors.Is(err, fs.ErrNotExist) {
			return nil, fail(exitDatabase, "no database here: %s does not exist; run hookrelay migrate to create one", dsn)
		}
		if mode == accessRead {
			s, err = hooksql.Open(ctx, hooksql.SQLite, sqlitefile.URI(dsn)+"?mode=ro&_pragma=busy_timeout(10000)", opts)
		} else {
			s, err = hooksql.OpenSQLite(ctx, dsn, opts)
		}
	case dialect == hooksql.SQLite:
		s, err = hooksql.OpenSQLite(ctx, dsn, opts)
	default:
		s, err = hooksql.Open(ctx, dialect, dsn, opts)
	}
	if errors.Is(err, hooksql.ErrInvalidDSN) {
		return nil, fail(exitUsage, "--dsn: %v", err)
	}
	if err != nil && parent.Err() != nil {
		return nil, interrupted()
	}
	if err != nil {
		return nil, fail(exitDatabase, "cannot reach the %s database: %v", dialect, err)
	}
	if needSchema {
		v, err := s.Version(ctx)
		if err != nil {
			_ = s.Close()
			if parent.Err() != nil {
				return nil, interrupted()
			}
			return nil, fail(exitDatabase, "cannot read the schema version: %v", err)
		}
		switch {
		case v == 0:
			_ = s.Close()
			return nil, fail(exitDatabase, "the database has no hookrelay tables (prefix %q); run hookrelay migrate first", s.TablePrefix())
		case v > hooksql.SchemaVersion:
			_ = s.Close()
			return nil, fail(exitDatabase, "the database is at schema version %d, newer than this hookrelay (%d); upgrade the CLI", v, hooksql.SchemaVersion)
		case v < hooksql.SchemaVersion:
			_ = s.Close()
			return nil, fail(exitDatabase, "the database is at schema version %d, older than this hookrelay (%d); run hookrelay migrate", v, hooksql.SchemaVersion)
		}
	}
	return s, nil
}

// client wraps a store in a hookrelay client for operator calls. Cross-
// tenant redrives are allowed only when the operator says so explicitly.
func (g *globals) client(s *hooksql.Store, crossTenant bool) (*hookrelay.Client, error) {
	cfg := hookrelay.Config{Queue: s, Ledger: s, Destinations: s}
	if crossTenant {
		cfg.Authorizer = hookrelay.AuthorizerFunc(func(context.Context, hookrelay.RedriveAuthorization) error { return nil })
	}
	return hookrelay.New(cfg)
}

// The drivers' own DSN forms, which must not be taken for SQLite paths (a
// missing file's error would print the password, and migrate would create
// a file by that name): go-sql-driver's user:password@net(addr)/db (or
// user:password@/db) and libpq's keyword=value list.
var (
	mysqlDriverDSN     = regexp.MustCompile(`@(tcp[46]?|unix)\(|^[^/]*@/|@/[^/]*$`)
	postgresKeywordDSN = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout)\s*=`)
	// schemelessURL is a URL's user:password@ with the scheme left off
	// (root:pw@db.example.com:3306/test): a name, a colon, then an '@'
	// before the path's first '/' (or '\': a Windows path such as
	// C:\Users\me@corp\hr.db is a path).
	schemelessURL = regexp.MustCompile(`^[^/\\:@]+:[^/\\@]*@`)
)

// parseDSN tells the dialect from the DSN's form and returns the DSN its
// driver takes.
func parseDSN(raw string) (hooksql.Dialect, string, error) {
	switch {
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		return hooksql.Postgres, raw, nil
	case strings.HasPrefix(raw, "mysql://"), strings.HasPrefix(raw, "mariadb://"):
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", errors.New("malformed mysql URL")
		}
		if u.Hostname() == "" {
			// The driver would dial its default, 127.0.0.1:3306.
			return "", "", errors.New("malformed mysql URL: it names no host (want mysql://user:pass@host:port/db)")
		}
		var user string
		if u.User != nil {
			user = u.User.Username()
			if p, ok := u.User.Password(); ok {
				user += ":" + p
			}
			user += "@"
		}
		host := u.Host
		if u.Port() == "" {
			host += ":3306"
		}
		q := u.Query()
		if q.Get("parseTime") == "" {
			q.Set("parseTime", "true")
		}
		return hooksql.MySQL, fmt.Sprintf("%stcp(%s)%s?%s", user, host, u.Path, q.Encode()), nil
	case strings.HasPrefix(raw, "sqlite://"):
		return hooksql.SQLite, strings.TrimPrefix(raw, "sqlite://"), nil
	case strings.HasPrefix(raw, "sqlite:"):
		return hooksql.SQLite, strings.TrimPrefix(raw, "sqlite:"), nil
	case mysqlDriverDSN.MatchString(raw):
		return hooksql.MySQL, raw, nil
	case postgresKeywordDSN.MatchString(raw):
		return hooksql.Postgres, raw, nil
	case strings.Contains(raw, "://"):
		return "", "", fmt.Errorf("unsupported scheme in %q (want a SQLite path, postgres:// or mysql://)", strings.SplitN(raw, "://", 2)[0]+"://…")
	case schemelessURL.MatchString(raw):
		// Not echoed: what precedes the '@' is a password.
		return "", "", errors.New("this looks like a database URL without its scheme (user:password@host…); write postgres://… or mysql://… (for a SQLite file whose name has ':' and '@', write sqlite:PATH)")
	}
	return hooksql.SQLite, raw, nil
}
