package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
	"github.com/hookrelay/hookrelay/internal/benchenv"
	"github.com/hookrelay/hookrelay/internal/proccpu"
)

// TestProbeSaysWhenItCannotSeeTheServer: --probe reads the CPU of the
// server backends whose application_name is peerbench. Without that name
// in the DSN it sees none, and must say the server's figure is unknown
// rather than print 0s, which reads as a server that did no work; with
// it, it prints the backends' CPU per delivery.
func TestProbeSaysWhenItCannotSeeTheServer(t *testing.T) {
	dsn := os.Getenv(benchenv.PostgresDSNEnv)
	if dsn == "" {
		t.Skipf("set %s to probe PostgreSQL", benchenv.PostgresDSNEnv)
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("%s is not a URL DSN: %v", benchenv.PostgresDSNEnv, err)
	}
	q := u.Query()
	q.Del("application_name")
	u.RawQuery = q.Encode()
	without := u.String()
	q.Set("application_name", "peerbench")
	u.RawQuery = q.Encode()
	with := u.String()

	ctx := context.Background()
	probeLine := func(dsn string) string {
		s, err := hooksql.Open(ctx, hooksql.Postgres, dsn, hooksql.Options{})
		require.NoError(t, err)
		defer s.Close()
		p := &probedStore{Store: s}
		p.begin()
		// Some work on the server, on a pooled connection the probe finds.
		var n int
		require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT count(*) FROM generate_series(1, 200000)").Scan(&n))
		var out bytes.Buffer
		p.report(&out, 1)
		return out.String()
	}
	local, err := hooksql.Open(ctx, hooksql.Postgres, dsn, hooksql.Options{})
	require.NoError(t, err)
	var pid int
	require.NoError(t, local.DB().QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	_, _, onThisMachine := proccpu.Stat("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, local.Close())
	if !onThisMachine {
		t.Skip("the PostgreSQL server's processes are not on this machine: the probe cannot read them")
	}
	assert.Contains(t, probeLine(without), "server backends unknown (no backend seen")
	assert.Regexp(t, regexp.MustCompile(`server backends [0-9.]+(µs|ms|s), this process`), probeLine(with))
}
