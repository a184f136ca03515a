// Package benchenv sets up what the benchmark and soak commands run
// against: a store on a named backend (memory, SQLite, PostgreSQL, or a
// broker queue — NATS JetStream, RabbitMQ — over a memory ledger), and an
// HTTP sender that may dial loopback only.
package benchenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// PostgresDSNEnv names the environment variable holding the PostgreSQL DSN,
// the same one the SQL adapter's tests read.
const PostgresDSNEnv = "HOOKRELAY_TEST_POSTGRES_DSN"

// MySQLDSNEnv names the environment variable holding the MySQL/MariaDB DSN
// (go-sql-driver form), as the tests use it.
const MySQLDSNEnv = "HOOKRELAY_TEST_MYSQL_DSN"

// Store is one backend's Queue, Ledger and Destinations, with what a
// harness needs around them.
type Store struct {
	Name string
	// Note says what the backend is made of when its Queue, Ledger and
	// Destinations are not one store; empty otherwise.
	Note         string
	Queue        hookrelay.Queue
	Ledger       hookrelay.Ledger
	Destinations hookrelay.Destinations
	// Put adds or replaces a destination.
	Put func(ctx context.Context, d hookrelay.Destination) error
	// DB is the SQL backend's database handle; nil for the others.
	DB *sql.DB
	// Close releases the store (and drops what it created in a shared
	// database, when Options.Drop is set; a broker backend always deletes
	// the streams or queues it created).
	Close func() error

	// created names a broker backend's streams or queues, which Close
	// deletes.
	created []string
	// prefix is a SQL backend's table prefix; keep makes Close leave its
	// tables (KeepTables).
	prefix string
	keep   atomic.Bool
}

// KeepTables makes Close leave a SQL backend's tables in place even when
// Options.Drop is set — for a run that found something to inspect — and
// returns their prefix ("" for other backends).
func (s *Store) KeepTables() string {
	s.keep.Store(true)
	return s.prefix
}

// Options configure Open.
type Options struct {
	// PostgresDSN is required for "postgres".
	PostgresDSN string
	// MySQLDSN is required for "mysql".
	MySQLDSN string
	// Dir holds SQLite database files.
	Dir string
	// TablePrefix names this run's tables in a shared database.
	TablePrefix string
	// Drop removes this run's tables on Close.
	Drop bool
	// NATSURL is the NATS server for "nats"; empty is DefaultNATSURL.
	NATSURL string
	// AMQPURL is the RabbitMQ server for "rabbitmq"; empty is
	// DefaultAMQPURL.
	AMQPURL string
	// Concurrency is the worker's Concurrency; the RabbitMQ prefetch is set
	// to eight times it, as the adapter advises (zero: the adapter's
	// default, hookamqp.DefaultPrefetch).
	Concurrency int
	// LeaseFor is the worker's LeaseFor (zero: hookrelay's default, 2m);
	// the NATS consumer's AckWait is set to twice it, as the adapter
	// refuses a lease that is not below AckWait.
	LeaseFor time.Duration
	// ConnMaxLifetime is the SQL stores' hooksql.Options.ConnMaxLifetime
	// (zero: the adapter's default).
	ConnMaxLifetime time.Duration
}

// Backends lists the names Open accepts.
var Backends = []string{"memory", "sqlite", "postgres", "mysql", "nats", "rabbitmq"}

// Open returns a fresh, migrated store on the named backend.
func Open(ctx context.Context, name string, o Options) (*Store, error) {
	switch name {
	case "memory":
		store, dests := memory.NewStore(), memory.NewDestinations()
		return &Store{
			Name: name, Queue: store, Ledger: store, Destinations: dests,
			Put: dests.Put, Close: func() error { return nil },
		}, nil
	case "sqlite", "postgres", "mysql":
		return openSQL(ctx, name, o)
	case "nats":
		return openNATS(ctx, name, o)
	case "rabbitmq":
		return openRabbitMQ(ctx, name, o)
	}
	return nil, fmt.Errorf("unknown backend %q (known: %s)", name, strings.Join(Backends, ", "))
}

// Loopback is the allow-list that opens the SSRF guard for 127.0.0.1 and ::1.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// onlyLoopback refuses, under the SSRF guard, any dial that is not to
// loopback: the harnesses never touch another address.
func onlyLoopback(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		return syscall.EPERM
	}
	return nil
}

// LoopbackSender returns the real HTTP sender with the guard opened for
// loopback and closed to everything else.
func LoopbackSender(cfg hookhttp.Config) (*hookhttp.Sender, error) {
	cfg.AllowNetworks = Loopback
	cfg.Dialer = &net.Dialer{Control: onlyLoopback}
	return hookhttp.New(cfg)
}
