package hooksql

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenMySQLPutsArgumentsIntoTheStatement: Open on MySQL turns the
// driver's interpolateParams on, so a statement with arguments is one round
// trip and the server prepares nothing; a DSN that sets interpolateParams
// keeps its own choice.
func TestOpenMySQLPutsArgumentsIntoTheStatement(t *testing.T) {
	dsn := os.Getenv("HOOKRELAY_TEST_MYSQL_DSN")
	if dsn == "" {
		t.Skip("set HOOKRELAY_TEST_MYSQL_DSN to run against MySQL or MariaDB")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, tc := range []struct {
		name, dsn string
		prepares  bool
	}{
		{"default", dsn, false},
		{"interpolateParams=false kept", dsn + sep + "interpolateParams=false", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), MySQL, tc.dsn, Options{})
			require.NoError(t, err)
			defer s.Close()
			assert.Equal(t, tc.prepares, preparesOnTheServer(t, s.DB()))
		})
	}
}

// preparesOnTheServer runs a statement with an argument on one connection
// and reports whether the server prepared a statement for it.
func preparesOnTheServer(t *testing.T, db *sql.DB) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	prepared := func() int {
		var name string
		var n int
		require.NoError(t, conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n))
		return n
	}
	before := prepared()
	var got int
	require.NoError(t, conn.QueryRowContext(ctx, "SELECT ? + 1", 41).Scan(&got))
	require.Equal(t, 42, got)
	return prepared() > before
}

// TestMySQLDSNSetsReadsOnlyTheParameters: a DSN's own setting is found
// among its parameters, and a password that looks like one is not.
func TestMySQLDSNSetsReadsOnlyTheParameters(t *testing.T) {
	for dsn, want := range map[string]bool{
		"root@tcp(127.0.0.1:3306)/test":                                         false,
		"root@tcp(127.0.0.1:3306)/test?parseTime=true&interpolateParams=false":  true,
		"root@tcp(127.0.0.1:3306)/test?interpolateParams=true":                  true,
		"u:p?interpolateParams=false@tcp(127.0.0.1:3306)/test":                  false,
		"u:a/b?interpolateParams=1@tcp(127.0.0.1:3306)/test?parseTime=true":     false,
		"u:a/b@tcp(127.0.0.1:3306)/test?parseTime=true&interpolateParams=false": true,
		"root@tcp(127.0.0.1:3306)/test?xinterpolateParams=false&parseTime=true": false,
	} {
		assert.Equal(t, want, mysqlDSNSets(dsn, "interpolateParams"), dsn)
	}
}
