package hooksql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
	"github.com/hookrelay/hookrelay/internal/sqlitefile"

	// The three drivers this adapter speaks to, registered as "sqlite",
	// "pgx" and "mysql".
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
)

// Dialect names the SQL database behind a Store.
type Dialect string

const (
	// SQLite through modernc.org/sqlite (pure Go): the embedded default.
	SQLite Dialect = "sqlite"
	// Postgres through github.com/jackc/pgx/v5/stdlib; PostgreSQL 10 or
	// later.
	Postgres Dialect = "postgres"
	// MySQL through github.com/go-sql-driver/mysql; covers MariaDB (10.6 or
	// later, for SKIP LOCKED) and MySQL (8.0 or later).
	MySQL Dialect = "mysql"
)

// driverName is the database/sql driver each dialect opens with.
func (d Dialect) driverName() string {
	switch d {
	case Postgres:
		return "pgx"
	default:
		return string(d)
	}
}

// DefaultTablePrefix is the table prefix when Options.TablePrefix is empty.
const DefaultTablePrefix = "hookrelay_"

// DefaultMaxPayloadBytes is the payload limit when Options.MaxPayloadBytes
// is zero. It stays under MariaDB's default max_allowed_packet (16 MiB).
const DefaultMaxPayloadBytes = 8 << 20

// Options configure a Store.
type Options struct {
	// Dialect is the database behind the *sql.DB. Required by New; Open and
	// OpenSQLite set it.
	Dialect Dialect
	// TablePrefix is prepended to every table and index name, so several
	// hookrelay installations (or test runs) can share one database. It must
	// match ^[a-z_][a-z0-9_]*$ and be at most 40 bytes, and on PostgreSQL
	// at most 35 (MaxPostgresTablePrefix). Defaults to "hookrelay_".
	TablePrefix string
	// MaxPayloadBytes refuses larger payloads at Create and EnqueueTx. It
	// should be at least the Client's MaxPayloadBytes. Defaults to
	// DefaultMaxPayloadBytes (8 MiB).
	MaxPayloadBytes int
	// MaxOpenConns caps the connection pool that Open and OpenSQLite
	// create, and as many connections are kept open between uses, so a busy
	// worker never pays for a new connection per query (database/sql keeps
	// only 2 idle by default, and opening a PostgreSQL connection costs far
	// more than the query). The worker needs few: its claims and batched
	// ledger writes each take one connection at a time, and the PostgreSQL
	// wake-up listener holds one; the rest serve your enqueues and operator
	// reads. On PostgreSQL and MySQL the Store's first claim (a worker
	// starting) opens 8 of them at once, at most half, so its first
	// deliveries do not each wait for a new connection. Defaults to
	// DefaultMaxOpenConns. Ignored by New: a caller-owned pool keeps its own
	// settings (see New).
	MaxOpenConns int
	// ConnMaxLifetime closes pooled connections after this age, so a
	// failover or a load balancer's rebalancing is picked up. On PostgreSQL
	// each connection retires at an age of its own between 3/4 of it and
	// all of it, so that connections opened together are not replaced
	// together. Defaults to DefaultConnMaxLifetime. Ignored by New.
	ConnMaxLifetime time.Duration
}

// DefaultMaxOpenConns is the pool size Open and OpenSQLite use when
// Options.MaxOpenConns is zero. All of them are kept idle between uses.
const DefaultMaxOpenConns = 16

// DefaultConnMaxLifetime is the pooled connections' lifetime when
// Options.ConnMaxLifetime is zero.
const DefaultConnMaxLifetime = 30 * time.Minute

var prefixPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// MaxTablePrefix is the longest Options.TablePrefix, in bytes.
const MaxTablePrefix = 40

// MaxPostgresTablePrefix is the longest Options.TablePrefix on PostgreSQL,
// in bytes: PostgreSQL cuts a name past 63 bytes short without an error,
// and the longest name the Store makes (the index
// destination_guards_claimable) adds 28 bytes to the prefix. Cut, a name
// is no longer the one the Store's statements and checks name, and two
// could become one. (MySQL's limit, 64, is no tighter than MaxTablePrefix:
// its index names there are shorter.)
const MaxPostgresTablePrefix = 63 - len("destination_guards_claimable")

// Store is the SQL implementation of hookrelay's Queue, Ledger, LedgerStats
// and Destinations ports: one row per delivery is both the ledger record and
// the queue entry. It is safe for concurrent use by many goroutines and many
// processes sharing one database. All times come from the caller; the
// database clock is never read.
type Store struct {
	db      *sql.DB
	ownDB   bool // opened by Open/OpenSQLite, closed by Close
	dialect Dialect
	prefix  string
	maxPay  int
	secrets []string // substrings redacted from error messages (DSN password)

	// returning reports INSERT … RETURNING support (MariaDB, not MySQL) on
	// the mysql dialect, learnt on first use.
	returningMu    sync.Mutex
	returningKnown bool
	returning      bool

	queries sync.Map // raw query → query with tables and placeholders bound

	// listenMu guards listeners, the pool connections ListenDue holds
	// (listenSlot), and listenFreed, closed when a listener gives its slot
	// back, waking those waiting for one (waitListenSlot).
	listenMu    sync.Mutex
	listeners   int64
	listenFreed chan struct{}

	// pgxArgs: the pool's driver is pgx's stdlib, which takes slices as
	// array arguments through database/sql (EnqueueTx's statement).
	pgxArgs bool

	// txStmts: SQLite transactions are *sql.Tx and run prepared statements
	// (stmts.go); set by OpenSQLite, whose DSN makes BeginTx immediate.
	txStmts      bool
	reusable     sync.Map // bound queries worth preparing (qp)
	reusableRows sync.Map // those run through QueryContext (qpRows)
	stmtMu       sync.RWMutex
	stmts        map[string]*sql.Stmt // bound query → statement prepared on db
	stmtsClosed  bool

	// sqliteWriter is a one-slot semaphore held by this Store's SQLite write
	// transactions.
	sqliteWriter chan struct{}

	// warmed: the pool was warmed for a worker (warmPool), on the first
	// claim.
	warmed sync.Once
}

var (
	_ hookrelay.Queue        = (*Store)(nil)
	_ hookrelay.Ledger       = (*Store)(nil)
	_ hookrelay.LedgerStats  = (*Store)(nil)
	_ hookrelay.Destinations = (*Store)(nil)
)

// Validate checks the options as New and Open do, before any database is
// opened: a Dialect other than sqlite, postgres or mysql (empty is left to
// New, which requires it, and Open, which sets it), a TablePrefix not
// matching ^[a-z_][a-z0-9_]*$ or over MaxTablePrefix bytes (over
// MaxPostgresTablePrefix with Dialect Postgres), and negative sizes or
// lifetimes. Its error, like New's and Open's for these, wraps
// ErrInvalidOptions and names the field.
func (o Options) Validate() error {
	switch o.Dialect {
	case SQLite, Postgres, MySQL, "":
	default:
		return invalidOptions(fmt.Sprintf("hooksql: Options.Dialect %s is unknown (want sqlite, postgres or mysql)", errtext.Quote(string(o.Dialect))))
	}
	if o.TablePrefix != "" && (!prefixPattern.MatchString(o.TablePrefix) || len(o.TablePrefix) > MaxTablePrefix) {
		return invalidOptions(fmt.Sprintf("hooksql: Options.TablePrefix %s must match ^[a-z_][a-z0-9_]*$ and be at most %d bytes", errtext.Quote(o.TablePrefix), MaxTablePrefix))
	}
	if o.Dialect == Postgres && len(o.TablePrefix) > MaxPostgresTablePrefix {
		return invalidOptions(fmt.Sprintf("hooksql: Options.TablePrefix %s is %d bytes; on PostgreSQL it must be at most %d,"+
			" as PostgreSQL cuts names past 63 bytes short and the longest name the store makes adds %d bytes to the prefix",
			errtext.Quote(o.TablePrefix), len(o.TablePrefix), MaxPostgresTablePrefix, 63-MaxPostgresTablePrefix))
	}
	switch {
	case o.MaxPayloadBytes < 0:
		return invalidOptions("hooksql: Options.MaxPayloadBytes must not be negative")
	case o.MaxOpenConns < 0:
		return invalidOptions("hooksql: Options.MaxOpenConns must not be negative")
	case o.ConnMaxLifetime < 0:
		return invalidOptions("hooksql: Options.ConnMaxLifetime must not be negative")
	}
	return nil
}

// New returns a Store on db, which must be open on the database named by
// opts.Dialect. The caller keeps ownership of db: Close does not close it.
// New does not touch the database; call Migrate before first use. A db of
// the pgx, go-sql-driver/mysql or modernc.org/sqlite driver with another
// dialect is refused; a driver of another kind is taken at its word.
//
// New leaves db's pool settings alone. A pool shared with a running worker
// needs idle connections: set db.SetMaxIdleConns to the same value as
// db.SetMaxOpenConns (at least 4, plus what the rest of your service uses
// at once), or every query beyond database/sql's default of 2 idle
// connections opens and closes a connection of its own — on PostgreSQL
// that alone cuts throughput several-fold. Open and OpenSQLite do this for
// you (Options.MaxOpenConns).
//
// With MySQL, open db with interpolateParams=true in its DSN (Open does so
// unless the DSN sets it): without it the driver sends every statement that
// has arguments as three round trips (prepare, execute, close). With it,
// set maxAllowedPacket=0 too (Open does), or a payload near
// Options.MaxPayloadBytes may make a statement the server refuses. Leave
// autocommit on (the server's default; Open refuses a DSN that turns it
// off): the Store's single statements are not wrapped in transactions of
// their own, and would never commit.
//
// With SQLite, every write transaction of the Store is BEGIN IMMEDIATE with
// a busy timeout on its connection, whatever the DSN says. Prefer
// OpenSQLite; otherwise open the file in WAL mode with a busy timeout
// (_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)) so readers run
// beside the writer.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("hooksql: New: db is nil")
	}
	if opts.Dialect == "" {
		return nil, invalidOptions("hooksql: Options.Dialect is required (sqlite, postgres or mysql)")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if d, ok := driverDialect(db.Driver()); ok && d != opts.Dialect {
		return nil, fmt.Errorf("hooksql: Options.Dialect is %s, but db's driver is %s's", opts.Dialect, d)
	}
	if opts.TablePrefix == "" {
		opts.TablePrefix = DefaultTablePrefix
	}
	if opts.MaxPayloadBytes == 0 {
		opts.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	_, pgxArgs := db.Driver().(*stdlib.Driver)
	return &Store{
		db: db, dialect: opts.Dialect, prefix: opts.TablePrefix, maxPay: opts.MaxPayloadBytes,
		sqliteWriter: make(chan struct{}, 1), pgxArgs: pgxArgs && opts.Dialect == Postgres,
	}, nil
}

// driverDialect is the dialect of one of the three drivers Open uses; a
// driver of another kind (another PostgreSQL driver, a wrapper) is not
// known.
func driverDialect(d driver.Driver) (Dialect, bool) {
	switch d.(type) {
	case *sqlite.Driver:
		return SQLite, true
	case *stdlib.Driver:
		return Postgres, true
	case *mysql.MySQLDriver:
		return MySQL, true
	}
	return "", false
}

// Open opens dsn with the driver for dialect (pgx for Postgres, mysql for
// MySQL, modernc sqlite for SQLite), checks that the database answers and
// returns a Store that owns the connection pool: Close closes it. It does not
// migrate, nor read the schema version (Migrate refuses a newer one). opts.Dialect is ignored. A DSN the driver cannot read is
// refused, before anything is dialed, with an error wrapping ErrInvalidDSN;
// a server that does not answer is ErrDatabase (or the context's error).
// Errors never contain the DSN's password (nor, when pgx cannot parse it,
// the DSN). An in-memory SQLite database
// (":memory:", mode=memory) is refused: each pooled connection would have
// its own, or the database would vanish when its last connection closed.
// A PostgreSQL URL's scheme may be spelt in any case (POSTGRES://…).
//
// On MySQL, Open turns on the driver's interpolateParams unless the DSN
// sets it: the driver then puts a statement's arguments into its text, and
// a statement costs one round trip instead of three (prepare, execute,
// close) — with it, a batch of ledger writes is a few round trips instead
// of a few per delivery. The driver refuses it with the multibyte character
// sets it cannot escape safely (big5, cp932, gb2312, gbk, sjis); set
// interpolateParams=false in such a DSN. Open also sets maxAllowedPacket=0
// unless the DSN sets it, so that a statement too long for the server once
// its arguments are in its text (a payload near Options.MaxPayloadBytes)
// is sent prepared instead of refused; a DSN that sets it must set it to
// at most the server's max_allowed_packet.
func Open(ctx context.Context, dialect Dialect, dsn string, opts Options) (*Store, error) {
	opts.Dialect = dialect
	secrets := dsnSecrets(dsn)
	if dialect == Postgres {
		dsn = lowerURLScheme(dsn)
	}
	switch dialect {
	case SQLite, Postgres, MySQL:
	default:
		return nil, fmt.Errorf("hooksql: dialect %s is unknown (want sqlite, postgres or mysql)", errtext.Quote(string(dialect)))
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if dialect == SQLite && sqliteInMemory(dsn) {
		return nil, invalidDSN(`hooksql: open sqlite: an in-memory database (":memory:", mode=memory or no file name) belongs to one connection, or lives only while one is open, so the Store's pool would lose tables and deliveries; use a file (in tests, one in a temporary directory) or the memory adapter`)
	}
	lifetime := opts.ConnMaxLifetime
	if lifetime <= 0 {
		lifetime = DefaultConnMaxLifetime
	}
	db, err := openDB(dialect, dsn, lifetime)
	if err != nil {
		return nil, fmt.Errorf("hooksql: open %s: %w", dialect, invalidDSN(redact(withoutConnString(err), secrets)))
	}
	s, err := New(db, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.ownDB, s.secrets = true, secrets
	conns := opts.MaxOpenConns
	if conns <= 0 {
		conns = DefaultMaxOpenConns
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(lifetime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, s.dbErr("open", err)
	}
	return s, nil
}

// lowerURLScheme writes a postgres:// or postgresql:// URL's scheme in
// lower case: schemes are case-insensitive, but pgx takes any other
// spelling for keyword=value text and would connect to its default server
// instead, sending the URL (password included) as a parameter name.
func lowerURLScheme(dsn string) string {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if len(dsn) >= len(scheme) && strings.EqualFold(dsn[:len(scheme)], scheme) {
			return scheme + dsn[len(scheme):]
		}
	}
	return dsn
}

// sqliteInMemory reports whether a SQLite DSN names an in-memory database
// (or, with no file name, a temporary one of its connection's own).
func sqliteInMemory(dsn string) bool {
	name, query, _ := strings.Cut(dsn, "?")
	name = strings.TrimPrefix(name, "file:")
	if name == "" || name == ":memory:" {
		return true
	}
	q, _ := url.ParseQuery(query)
	return q.Get("mode") == "memory"
}

// openDB opens a pool on dsn with dialect's driver and the driver
// settings Open uses (openMySQL on MySQL, openPostgres on PostgreSQL with
// a lifetime; 0 leaves the connections' age alone).
func openDB(dialect Dialect, dsn string, lifetime time.Duration) (*sql.DB, error) {
	switch {
	case dialect == MySQL:
		return openMySQL(dsn)
	case dialect == Postgres && lifetime > 0:
		return openPostgres(dsn, lifetime)
	}
	return sql.Open(dialect.driverName(), dsn)
}

// retireAtKey is where openPostgres keeps a connection's retirement time,
// in pgconn's per-connection CustomData.
const retireAtKey = "hookrelay.retire_at"

// openPostgres opens a pgx pool on dsn whose connections each retire at an
// age of their own between 3/4 of lifetime and lifetime, instead of all at
// lifetime (db.SetConnMaxLifetime, which stays as the bound). Connections
// opened together — a worker opens 8 at once when it starts (warmPool) —
// would otherwise all be closed together and opened again together, every
// lifetime, each a new server process while deliveries wait: in peerbench's
// latency mode with a 3 s lifetime that put the p99 at 62–65 ms and the
// worst at 186 ms, against 9–11 ms and 13–25 ms without expiries
// (docs/benchmarks.md). database/sql asks the driver whether a connection
// may be reused (ResetSession) each time it takes one used before from the
// pool; past its time, the answer is driver.ErrBadConn, and database/sql
// closes it and takes or opens another, as it does for an expired one.
// database/sql has no jitter of its own, hence the hooks.
func openPostgres(dsn string, lifetime time.Duration) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg,
		stdlib.OptionAfterConnect(func(_ context.Context, c *pgx.Conn) error {
			c.PgConn().CustomData()[retireAtKey] = time.Now().Add(retirementAge(lifetime, rand.Float64()))
			return nil
		}),
		stdlib.OptionResetSession(func(_ context.Context, c *pgx.Conn) error {
			if at, ok := c.PgConn().CustomData()[retireAtKey].(time.Time); ok && !time.Now().Before(at) {
				return driver.ErrBadConn
			}
			return nil
		}),
	), nil
}

// retirementAge is the age at which a connection retires, for u uniform in
// [0, 1): uniform in (3/4 lifetime, lifetime].
func retirementAge(lifetime time.Duration, u float64) time.Duration {
	return lifetime - time.Duration(u*float64(lifetime/4))
}

// openMySQL opens a pool on dsn with interpolateParams on, and
// maxAllowedPacket=0 (the server's value), unless dsn sets them (see
// Open).
func openMySQL(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		if urlScheme.MatchString(dsn) {
			// The driver's own error names an unknown network.
			return nil, errors.New("the DSN must be in go-sql-driver/mysql form, user:password@tcp(host:port)/dbname, not a URL")
		}
		return nil, err
	}
	if v, ok := cfg.Params["autocommit"]; ok {
		switch strings.ToLower(strings.Trim(v, `'"`)) {
		case "0", "false", "off":
			// The store's single statements (a claim, a ledger write, a
			// migration's version record) are not in a transaction of
			// its own: with autocommit off each would wait in an open
			// transaction that nothing commits, and be lost with its
			// connection.
			return nil, fmt.Errorf("the DSN sets autocommit=%s; hookrelay's writes outside its own transactions would never commit: remove it (the server's default, on, is needed)", v)
		}
	}
	if !mysqlDSNSets(dsn, "interpolateParams") {
		cfg.InterpolateParams = true
	}
	if !mysqlDSNSets(dsn, "maxAllowedPacket") {
		// The server's own limit, read when a connection opens, instead of
		// the driver's 64 MiB guess: the driver then sends a statement whose
		// interpolated text the server would refuse (a payload at
		// Options.MaxPayloadBytes whose bytes all take two in the text is
		// 16 MiB, MariaDB's default limit) as a prepared one, the payload
		// apart, rather than have it refused.
		cfg.MaxAllowedPacket = 0
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// urlScheme matches the start of a URL (mysql://…).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// mysqlDSNSets reports whether a MySQL DSN sets the parameter name. The
// parameters follow the '?' after the last '/' (the database name's
// separator, as the driver parses it), so a '?' in the password is not
// taken for their start.
func mysqlDSNSets(dsn, name string) bool {
	_, params, _ := strings.Cut(dsn[strings.LastIndexByte(dsn, '/')+1:], "?")
	return slices.ContainsFunc(strings.Split(params, "&"), func(p string) bool {
		return strings.HasPrefix(p, name+"=")
	})
}

// OpenSQLite opens (creating if needed) the SQLite database file at path in
// WAL mode with synchronous=FULL (a commit survives a power loss, not only a
// crash), a busy timeout and immediate write transactions, and returns a
// Store that owns it. Several processes may open the same file. It does not
// migrate. opts.Dialect is ignored. The directory must exist; ":memory:" is
// refused (see Open).
func OpenSQLite(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		// A server DSN passed here by mistake has a '?': its password is
		// not printed.
		return nil, invalidDSN(fmt.Sprintf("hooksql: OpenSQLite: path %s must be a file name without '?' or '#'", errtext.Quote(redact(path, dsnSecrets(path)))))
	}
	if dir := filepath.Dir(path); dir != "." {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("hooksql: OpenSQLite: directory %s: %w", errtext.QuoteN(redact(dir, dsnSecrets(path)), maxQuotedPath), fs.ErrNotExist)
		}
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	s, err := Open(ctx, SQLite, sqlitefile.URI(path)+"?"+q.Encode(), opts)
	if err != nil {
		return nil, err
	}
	s.txStmts = true
	return s, nil
}

// maxQuotedPath is how much of a file path an error quotes.
const maxQuotedPath = 1024

// DB returns the connection pool the Store uses, e.g. to begin the
// transaction given to EnqueueTx.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns the Store's dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

// TablePrefix returns the prefix of the Store's tables.
func (s *Store) TablePrefix() string { return s.prefix }

// Close closes the Store's prepared statements, and the connection pool if
// Open or OpenSQLite opened it; a Store made by New leaves the caller's
// *sql.DB open.
func (s *Store) Close() error {
	s.closeStmts()
	if !s.ownDB {
		return nil
	}
	return s.db.Close()
}

// tableNames lists the Store's tables (without the prefix), newest last:
// every table a migration creates. TestDropTablesLeavesNoTableOfThePrefix
// fails when a migration adds one that is missing here.
var tableNames = []string{"deliveries", "attempts", "destinations", "redrives", "idempotency", "schema_migrations",
	"attempt_summaries", "destination_guards"}

// DropTables removes every table of the Store's prefix (IF EXISTS), newest
// first, destroying what they hold; Migrate creates them again. It is for
// test suites and benchmarks that make a prefix per run, and for removing
// hookrelay from a database.
func (s *Store) DropTables(ctx context.Context) error {
	var errs []error
	for _, name := range slices.Backward(tableNames) {
		if _, err := s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+s.prefix+name); err != nil {
			errs = append(errs, s.dbErr("drop table "+s.prefix+name, err))
		}
	}
	return errors.Join(errs...)
}

// q binds a query written with {d}, {a}, {dst}, {r}, {i}, {m}, {sum} for the
// tables, {seq} for the insertion-order column and ? placeholders to this
// Store's prefix and dialect. Results are cached.
func (s *Store) q(raw string) string {
	if v, ok := s.queries.Load(raw); ok {
		return v.(string)
	}
	seq := "seq"
	if s.dialect == SQLite {
		seq = "rowid"
	}
	out := strings.NewReplacer(
		"{d}", s.prefix+"deliveries",
		"{a}", s.prefix+"attempts",
		"{dst}", s.prefix+"destinations",
		"{r}", s.prefix+"redrives",
		"{m}", s.prefix+"schema_migrations",
		"{i}", s.prefix+"idempotency",
		"{sum}", s.prefix+"attempt_summaries",
		"{g}", s.prefix+"destination_guards",
		"{seq}", seq,
	).Replace(raw)
	if s.dialect == Postgres {
		var b strings.Builder
		n := 0
		for _, r := range out {
			if r == '?' {
				n++
				fmt.Fprintf(&b, "$%d", n)
				continue
			}
			b.WriteRune(r)
		}
		out = b.String()
	}
	s.queries.Store(raw, out)
	return out
}

// placeholders returns "?,?,…" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// lockSuffix is appended to SELECTs that lock the rows they return. SQLite
// needs none: its write transactions are exclusive.
func (s *Store) lockSuffix(skipLocked bool) string {
	if s.dialect == SQLite {
		return ""
	}
	if skipLocked {
		return " FOR UPDATE SKIP LOCKED"
	}
	return " FOR UPDATE"
}

var _ hookrelay.LedgerQueue = (*Store)(nil)

// LedgerRecordsAreQueueEntries implements hookrelay.LedgerQueue: a claim
// reads the row under the new lease, and ledger writes end the lease.
func (s *Store) LedgerRecordsAreQueueEntries() {}
