package hooksql

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenSQLiteRefusalDoesNotPrintADSNPassword: a server DSN given to
// OpenSQLite by mistake is refused (it has a '?'), and the refusal does
// not print its password.
func TestOpenSQLiteRefusalDoesNotPrintADSNPassword(t *testing.T) {
	for _, dsn := range []string{
		"postgres://hookrelay:s3cret-pw@127.0.0.1:1/test?sslmode=disable",
		"hookrelay:s3cret-pw@tcp(127.0.0.1:1)/test?parseTime=true",
		"host=127.0.0.1 password=s3cret-pw sslmode=disable#",
	} {
		_, err := OpenSQLite(context.Background(), dsn, Options{})
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "s3cret-pw")
		assert.Contains(t, err.Error(), "OpenSQLite")
	}
}

// TestOpenPostgresAcceptsAnUpperCaseURLScheme: URL schemes are
// case-insensitive, so POSTGRES://… and PostgreSQL://… reach the server
// they name (pgx alone reads them as keyword=value text and connects to
// its default server, sending the whole URL, password included, as a
// parameter name).
func TestOpenPostgresAcceptsAnUpperCaseURLScheme(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, scheme := range []string{"POSTGRES", "PostgreSQL"} {
		_, err := Open(ctx, Postgres, scheme+"://hookrelay:s3cret-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", Options{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "dial tcp 127.0.0.1:1", "dialled the host the URL names")
		assert.NotContains(t, err.Error(), "s3cret-pw")
	}
	dsn := os.Getenv("HOOKRELAY_TEST_POSTGRES_DSN")
	if !strings.HasPrefix(dsn, "postgres://") {
		t.Skip("set HOOKRELAY_TEST_POSTGRES_DSN to a postgres:// URL to open one with an upper-case scheme")
	}
	s, err := Open(ctx, Postgres, "POSTGRES"+strings.TrimPrefix(dsn, "postgres"), Options{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestErrorsDoNotLeakAnEscapedKeywordPassword: in keyword=value form a
// password may hold backslash-escaped quotes and spaces; no part of it
// appears in an error.
func TestErrorsDoNotLeakAnEscapedKeywordPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, dsn := range []string{
		`host=127.0.0.1 port=1 user=x password='s3cret\' tail-pw' sslmode=bogus`,
		`host=127.0.0.1 port=1 user=x password=s3cret\ tail-pw sslmode=bogus`,
		`host=127.0.0.1 port=1 user=x password='s3cret\' tail-pw' connect_timeout=2`,
	} {
		_, err := Open(ctx, Postgres, dsn, Options{})
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "s3cret", dsn)
		assert.NotContains(t, err.Error(), "tail-pw", dsn)
	}
	_, err := OpenSQLite(ctx, `host=127.0.0.1 password='s3cret\' tail-pw' sslmode=disable#`, Options{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.NotContains(t, err.Error(), "tail-pw")
}
