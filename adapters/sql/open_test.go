package hooksql

import (
	"context"
	"testing"

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
