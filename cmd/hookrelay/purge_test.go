package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// deliverAt delivers one webhook per event ID to dest, at the given time.
func (db *database) deliverAt(t *testing.T, at time.Time, dest string, eventIDs ...string) []string {
	t.Helper()
	ctx := context.Background()
	d, err := db.store.Destination(ctx, dest)
	require.NoError(t, err)
	mock := clock.NewMock()
	mock.Set(at)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: db.store, Ledger: db.store, Destinations: db.store, Clock: mock,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
	})
	require.NoError(t, err)
	ps := make([]hookrelay.EnqueueParams, len(eventIDs))
	for i, ev := range eventIDs {
		ps[i] = hookrelay.EnqueueParams{EventID: ev, TenantID: d.TenantID, DestinationID: dest, EventType: "lease.payment_recorded", Payload: []byte(`{}`)}
	}
	return db.attemptOnce(t, c, ps)
}

// attemptOnce enqueues ps through c, then claims them at c's clock's now
// and makes each one attempt; it returns their delivery IDs.
func (db *database) attemptOnce(t *testing.T, c *hookrelay.Client, ps []hookrelay.EnqueueParams) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for _, p := range ps {
		res, err := c.Enqueue(ctx, p)
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	claims, err := db.store.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: 100, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, len(ids))
	for _, cl := range claims {
		require.NoError(t, c.Process(ctx, cl))
	}
	return ids
}

type purgeOutput struct {
	DryRun    bool  `json:"dry_run"`
	Removed   int64 `json:"removed"`
	Compacted int64 `json:"compacted"`
	Counts    []struct {
		DestinationID string `json:"destination_id"`
		State         string `json:"state"`
		Removed       int64  `json:"removed"`
		Compacted     int64  `json:"compacted"`
	} `json:"counts"`
}

// hookrelay purge removes delivered history past the retention and compacts
// older attempt details; --dry-run counts the same by destination and
// state without changing anything; dead records go only with --dead-after.
func TestPurge(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db database) {
		require.Equal(t, 0, db.cli(t, "migrate").code)
		db.open(t)
		ctx := context.Background()
		dead := db.seed(t, 2) // dead-lettered an hour ago: two to acct, one to crm
		old := db.deliverAt(t, time.Now().Add(-40*24*time.Hour), "acct", "pay_old_1", "pay_old_2")
		mid := db.deliverAt(t, time.Now().Add(-10*24*time.Hour), "crm", "contact_mid")
		recent := db.deliverAt(t, time.Now().Add(-time.Hour), "acct", "pay_recent")

		var out purgeOutput
		r := db.cli(t, "purge", "--dry-run", "--json")
		require.Equal(t, 0, r.code, r)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r)
		assert.True(t, out.DryRun)
		assert.EqualValues(t, 2, out.Removed, "two delivered records older than 30 days")
		assert.EqualValues(t, 1, out.Compacted, "one older than 7 days")
		require.Len(t, out.Counts, 2)
		assert.Equal(t, "acct", out.Counts[0].DestinationID)
		assert.Equal(t, "delivered", out.Counts[0].State)
		assert.EqualValues(t, 2, out.Counts[0].Removed)
		assert.Equal(t, "crm", out.Counts[1].DestinationID)
		assert.EqualValues(t, 1, out.Counts[1].Compacted)
		for _, id := range old {
			_, err := db.store.Get(ctx, id)
			require.NoError(t, err, "a dry run removes nothing")
		}
		r = db.cli(t, "purge", "--dry-run")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "would remove 2 records and compact the attempts of 1")

		r = db.cli(t, "purge", "--json", "--batch", "1")
		require.Equal(t, 0, r.code, r)
		out = purgeOutput{}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r)
		assert.False(t, out.DryRun)
		assert.EqualValues(t, 2, out.Removed)
		assert.EqualValues(t, 1, out.Compacted)
		for _, id := range old {
			_, err := db.store.Get(ctx, id)
			assert.ErrorIs(t, err, hookrelay.ErrNotFound, "removed")
		}
		as, err := db.store.Attempts(ctx, mid[0])
		require.NoError(t, err)
		assert.Empty(t, as, "compacted")
		sum, err := db.store.AttemptSummary(ctx, mid[0])
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Count)
		assert.Equal(t, 204, sum.LastStatusCode)
		r = db.cli(t, "--json", "dead", "show", mid[0])
		require.Equal(t, 0, r.code, r)
		var shown struct {
			Attempts  []json.RawMessage `json:"attempts"`
			Compacted *struct {
				Count          int `json:"count"`
				LastStatusCode int `json:"last_status_code"`
			} `json:"compacted_attempts"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown), r)
		assert.Empty(t, shown.Attempts)
		require.NotNil(t, shown.Compacted, "show reports what compaction kept: %s", r.stdout)
		assert.Equal(t, 1, shown.Compacted.Count)
		assert.Equal(t, 204, shown.Compacted.LastStatusCode)
		r = db.cli(t, "dead", "show", mid[0])
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "1 earlier attempts compacted by retention")
		assert.NotContains(t, r.stdout, "no attempts recorded")
		assert.Equal(t, hookrelay.StateDelivered, db.state(t, recent[0]), "recent history is kept")
		assert.Equal(t, hookrelay.StateDead, db.state(t, dead[0]), "dead letters are kept without --dead-after")

		r = db.cli(t, "purge", "--dead-after", "0d")
		require.Equal(t, 0, r.code, r)
		assert.Contains(t, r.stdout, "removed 3 records")
		_, err = db.store.Get(ctx, dead[0])
		assert.ErrorIs(t, err, hookrelay.ErrNotFound, "removed once the operator said so")

		r = db.cli(t, "purge", "--delivered-after", "soon")
		assert.Equal(t, exitUsage, r.code, r)
		assert.Contains(t, r.stderr, "delivered-after")
	})
}

// An age in days too long for a time.Duration is refused. It used to wrap
// around: 213504d (585 years, meant as "keep them all") came out as about
// 25 minutes, and purge removed every dead record older than that.
func TestPurgeRefusesAnAgeInDaysThatOverflows(t *testing.T) {
	db := database{dsn: t.TempDir() + "/hookrelay.db", prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	db.seed(t, 2) // dead-lettered an hour ago
	for _, flag := range []string{"--dead-after", "--delivered-after", "--details-after"} {
		for _, age := range []string{"213504d", "106752d", "99999999999999999999d"} {
			r := db.cli(t, "purge", flag, age)
			assert.Equal(t, exitUsage, r.code, "%s %s: %s", flag, age, r)
			assert.Contains(t, r.stderr, "too long", "%s %s", flag, age)
		}
	}
	r := db.cli(t, "--json", "redrive", "plan")
	require.Zero(t, r.code, r)
	assert.Contains(t, r.stdout, `"total": 3`, "no dead record was removed")
	r = db.cli(t, "purge", "--dry-run", "--dead-after", "106751d")
	assert.Zero(t, r.code, "the longest age that fits is taken: %s", r)
}

// --batch is the rows one transaction picks and removes: a huge one (a typo,
// or "as many as possible") would be one enormous statement and allocation
// and hold its locks for long, so it is refused, naming the flag and limit.
func TestPurgeRefusesABatchOutsideItsBounds(t *testing.T) {
	db := database{dsn: t.TempDir() + "/hookrelay.db", prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	for _, n := range []string{"0", "-1", "1001", "1000000000"} {
		r := db.cli(t, "purge", "--batch", n)
		assert.Equal(t, exitUsage, r.code, "--batch %s: %s", n, r)
		assert.Contains(t, r.stderr, "--batch", "--batch %s", n)
		assert.Contains(t, r.stderr, "1000", "--batch %s names the limit", n)
	}
	r := db.cli(t, "purge", "--batch", "1000")
	assert.Zero(t, r.code, "the limit itself is taken: %s", r)
}

// A purge interrupted (Ctrl-C) after some of its batches committed says
// so and shows what those batches removed: it reported only "hooksql:
// clean history: …: context canceled", and the operator could not tell
// that thousands of records were already gone.
func TestAnInterruptedPurgeShowsWhatItsCommittedBatchesDid(t *testing.T) {
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	ctx := context.Background()
	require.NoError(t, db.store.Put(ctx, hookrelay.Destination{ID: "acct", TenantID: "tenant_a", URL: "https://accounting.example/hooks"}))
	db.deliverAt(t, time.Now().Add(-time.Hour), "acct", "evt_0")
	// Copies of the delivered record: enough one-record batches that the
	// purge is still running when it is interrupted.
	var cols []string
	rows, err := db.store.DB().QueryContext(ctx, "SELECT name FROM pragma_table_info('hookrelay_deliveries')")
	require.NoError(t, err)
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		cols = append(cols, c)
	}
	require.NoError(t, rows.Err())
	sel := slices.Clone(cols)
	for i, c := range sel {
		switch c {
		case "id", "event_id":
			sel[i] = c + " || '_' || n.x"
		}
	}
	_, err = db.store.DB().ExecContext(ctx, "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000)"+
		" INSERT INTO hookrelay_deliveries ("+strings.Join(cols, ", ")+") SELECT "+strings.Join(sel, ", ")+" FROM hookrelay_deliveries, n")
	require.NoError(t, err)

	runCtx, cancel := context.WithCancel(ctx)
	var stdout, stderr strings.Builder
	done := make(chan int)
	go func() {
		done <- run(runCtx, []string{"--dsn", db.dsn, "purge", "--delivered-after", "1m", "--batch", "1"}, &stdout, &stderr, func(string) string { return "" })
	}()
	var removed int
	require.Eventually(t, func() bool {
		require.NoError(t, db.store.DB().QueryRowContext(ctx, "SELECT 20001 - COUNT(*) FROM hookrelay_deliveries").Scan(&removed))
		return removed >= 3
	}, 30*time.Second, time.Millisecond, "the purge removes records")
	cancel()
	code := <-done
	require.NoError(t, db.store.DB().QueryRowContext(ctx, "SELECT 20001 - COUNT(*) FROM hookrelay_deliveries").Scan(&removed))
	require.Less(t, removed, 20001, "interrupted before the end:\n%s\n%s", stdout.String(), stderr.String())
	assert.Equal(t, exitFailed, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stderr.String(), "interrupted")
	assert.Contains(t, stdout.String(), "acct", "the batches that committed are shown")
	m := regexp.MustCompile(`removed (\d+) records`).FindStringSubmatch(stdout.String())
	require.NotNil(t, m, stdout.String())
	shown, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.LessOrEqual(t, shown, removed, "no more than was removed")
	assert.GreaterOrEqual(t, shown, removed-1, "every committed batch but the one cut short")
}

// A purge that fails after some batches committed says what they removed
// before the error: those records are gone, and a purge run again does
// not count them.
func TestPurgeThatFailsMidwaySaysWhatItRemoved(t *testing.T) {
	db := database{dsn: t.TempDir() + "/hookrelay.db", prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	db.seed(t, 2) // the destinations, and dead letters the purge keeps
	old := db.deliverAt(t, time.Now().Add(-40*24*time.Hour), "acct", "pay_old_1", "pay_old_2")
	db.deliverAt(t, time.Now().Add(-10*24*time.Hour), "crm", "contact_mid") // its compaction fails
	_, err := db.store.DB().Exec("CREATE TRIGGER hookrelay_summaries_refused BEFORE INSERT ON hookrelay_attempt_summaries" +
		" BEGIN SELECT RAISE(ABORT, 'compaction refused'); END")
	require.NoError(t, err)

	r := db.cli(t, "purge", "--json", "--batch", "1")
	assert.NotZero(t, r.code, r)
	assert.Contains(t, r.stderr, "compaction refused", r)
	var out purgeOutput
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "what it did, before the error: %s", r)
	assert.EqualValues(t, 1, out.Removed, "the first batch removed one record before its compaction failed")
	gone := 0
	for _, id := range old {
		if _, err := db.store.Get(context.Background(), id); errors.Is(err, hookrelay.ErrNotFound) {
			gone++
		}
	}
	assert.Equal(t, 1, gone, "and one is gone")
}
