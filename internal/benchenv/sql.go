package benchenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

// openSQL opens and migrates a SQLite file in o.Dir, the PostgreSQL
// database at o.PostgresDSN or the MySQL/MariaDB database at o.MySQLDSN,
// with this run's table prefix, as the README tells users to: the
// connection pool is the adapter's default.
func openSQL(ctx context.Context, name string, o Options) (*Store, error) {
	opts := hooksql.Options{TablePrefix: o.TablePrefix, ConnMaxLifetime: o.ConnMaxLifetime}
	var s *hooksql.Store
	var err error
	switch name {
	case "sqlite":
		s, err = hooksql.OpenSQLite(ctx, filepath.Join(o.Dir, "hookrelay.db"), opts)
	case "postgres":
		if o.PostgresDSN == "" {
			return nil, fmt.Errorf("backend postgres needs a DSN: set %s or pass --postgres-dsn", PostgresDSNEnv)
		}
		s, err = hooksql.Open(ctx, hooksql.Postgres, o.PostgresDSN, opts)
	case "mysql":
		if o.MySQLDSN == "" {
			return nil, fmt.Errorf("backend mysql needs a DSN: set %s or pass --mysql-dsn", MySQLDSNEnv)
		}
		s, err = hooksql.Open(ctx, hooksql.MySQL, o.MySQLDSN, opts)
	}
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	st := &Store{Name: name, Queue: s, Ledger: s, Destinations: s, Put: s.Put, DB: s.DB(), prefix: s.TablePrefix()}
	st.Close = func() error {
		var err error
		if o.Drop && !st.keep.Load() {
			err = s.DropTables(context.Background())
		}
		return errors.Join(err, s.Close())
	}
	return st, nil
}
