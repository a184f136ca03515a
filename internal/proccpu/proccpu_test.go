package proccpu

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatReadsCommandAndTicks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	// utime 250 and stime 50 ticks: 3 s. The command holds a space and
	// a ')' of its own.
	fields := "S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0"
	cmd, used, ok := Stat(write("odd", "4242 (post gres) x) "+fields+"\n"))
	require.True(t, ok)
	assert.Equal(t, "post gres) x", cmd)
	assert.Equal(t, int64(3000), used.Milliseconds())

	for name, text := range map[string]string{
		"no command":  "4242 postgres " + fields,
		"cut short":   "4242 (postgres) S 1 2 3",
		"not numbers": "4242 (postgres) S 1 2 3 4 5 6 7 8 9 10 x y 0",
	} {
		_, _, ok := Stat(write(strconv.Itoa(len(name)), text))
		assert.False(t, ok, name)
	}
	_, _, ok = Stat(filepath.Join(dir, "gone"))
	assert.False(t, ok, "a process that ended")
}

func TestSelfCountsThisProcess(t *testing.T) {
	before := Self()
	sum := sha256.Sum256(nil)
	for range 200_000 {
		sum = sha256.Sum256(sum[:])
	}
	assert.Greater(t, Self(), before, "hashing 200,000 times takes some CPU")
}

// TestServersCountsALocalPostgreSQL: a query that keeps a backend busy
// shows up in the postgres server's CPU time, not in this process's.
func TestServersCountsALocalPostgreSQL(t *testing.T) {
	dsn := os.Getenv("HOOKRELAY_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("set HOOKRELAY_TEST_POSTGRES_DSN to read a local server's CPU time")
	}
	if u, err := url.Parse(dsn); err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1") {
		t.Skip("the server may run on another machine, where its CPU time cannot be read")
	}
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Ping())
	before := Servers()
	require.Contains(t, before, "postgres", "the server is on this machine: its processes must be found")
	self := Self()
	var n int64
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT count(*) FROM generate_series(1, 5000000)").Scan(&n))
	require.EqualValues(t, 5000000, n)
	server := Servers()["postgres"] - before["postgres"]
	assert.Positive(t, server)
	assert.Greater(t, server, Self()-self, "counting 5,000,000 rows is the server's work")
}
