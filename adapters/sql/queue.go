package hooksql

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

// enqueueCheckPostgres is Enqueue's check on PostgreSQL through pgx: how
// many of the IDs (one array) have a record.
func (s *Store) enqueueCheckPostgres() string {
	return s.q("SELECT COUNT(*) FROM {d} WHERE id = ANY(CAST(? AS TEXT[]))")
}

// ReasonUndecodable is the dead-letter reason of a stored record that a
// claim found but could not decode (edited by hand or corrupted): it is
// moved to the dead-letter path for an operator instead of blocking the
// queue. Records written by a newer library (a newer envelope version) are
// not claimed at all; they wait for a worker that can read them.
const ReasonUndecodable = "record_undecodable"

// Enqueue implements hookrelay.Queue. The row Create wrote is the queue
// entry, so this only checks that every delivery exists.
func (s *Store) Enqueue(ctx context.Context, deliveries []hookrelay.Delivery) error {
	ids := make([]string, 0, len(deliveries))
	for _, d := range deliveries {
		ids = append(ids, d.ID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), insertChunkRows)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		var n int
		query := s.q("SELECT COUNT(*) FROM {d} WHERE id IN (" + placeholders(len(chunk)) + ")")
		var err error
		if s.dialect == Postgres {
			// Under the plan settings: a plan kept from a young table read
			// the whole table for every chunk (planSettings). Through pgx
			// the IDs go as one array, so the text is the same whatever
			// the chunk's length: one prepared statement, not one per
			// length.
			err = s.rowWithSettings(ctx, pgWriteSettings, "enqueue", s.enqueueCheckPostgres(), []any{chunk}, query, args, &n)
		} else {
			err = s.db.QueryRowContext(ctx, query, args...).Scan(&n)
			if err != nil {
				err = s.dbErr("enqueue", err)
			}
		}
		if err != nil {
			return err
		}
		if n != len(chunk) {
			return fmt.Errorf("hooksql: enqueue before create: %w", hookrelay.ErrNotFound)
		}
	}
	return nil
}

var _ hookrelay.ClaimsByDestinationRoom = (*Store)(nil)

// ClaimsHonourDestinationRoom implements hookrelay.ClaimsByDestinationRoom.
func (s *Store) ClaimsHonourDestinationRoom() {}

// candidatesPerClaim bounds how many due rows a claim with per-destination
// rooms looks at: this many times its limit (up to maxClaimCandidates more),
// so that a destination with a long backlog at the head of the queue cannot
// hide the others' due work from one claim. A claim never reads more. Each
// candidate is locked (SKIP LOCKED, so concurrent claimers take disjoint
// rows), and a row lock is a write: with 4 the server spent about 11% more
// CPU per delivery than with 1 in peerbench; the worker's rooms are several
// times its per-destination limit (ClaimAhead), so 2 leaves slack for a
// skewed head without locking rows by the hundred that are not taken.
const (
	candidatesPerClaim = 2
	maxClaimCandidates = 1000
)

// warmConns is how many connections of its pool a Store opened by Open
// opens at once on its first claim (at most half the pool): about what a
// worker just started uses at once while its first deliveries arrive.
const warmConns = 8

// warmPool opens up to warmConns connections of the pool at once and puts
// them back idle, before a worker's first claim. A worker just started
// reaches for several connections within milliseconds (its claims, its
// batched ledger writes, a destination read per destination), and on
// PostgreSQL each new one is a server process to start: opened on demand,
// one after another, they put the p99 of the first second's deliveries
// after Start at 61–149 ms at 200 deliveries/s, against about 7 ms once
// warm (peerbench --mode latency, warm-up phase; docs/benchmarks.md).
// Only a pool the Store owns is warmed (Open keeps every connection idle;
// a caller's pool may not keep them), and not SQLite's, whose connections
// are local files.
// A connection that fails to open is left for the queries to open. It
// returns how many connections it opened and ran its read on.
func (s *Store) warmPool(ctx context.Context) (touched int) {
	if !s.ownDB || s.dialect == SQLite {
		return 0
	}
	n := min(warmConns, s.db.Stats().MaxOpenConnections/2)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conns := make([]*sql.Conn, n)
	ok := make([]bool, n)
	query := s.q(warmQuery)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			c, err := s.db.Conn(ctx)
			if err != nil {
				return
			}
			conns[i] = c
			var count int
			ok[i] = c.QueryRowContext(ctx, query, "", "").Scan(&count) == nil
		})
	}
	wg.Wait()
	for i, c := range conns {
		if c != nil {
			_ = c.Close() // back to the pool, idle
		}
		if ok[i] {
			touched++
		}
	}
	return touched
}

// warmQuery is what each warmed connection runs: it reads nothing, but
// the server loads the tables' and indexes' descriptions a worker's
// statements need into the connection's caches, which each new PostgreSQL
// connection otherwise does inside its first claim or destination read.
const warmQuery = `SELECT count(*) FROM (SELECT 1 AS x FROM {d} WHERE id = ? UNION ALL SELECT 1 FROM {dst} WHERE id = ?) t`

// Claim implements hookrelay.Queue. Due pending deliveries are chosen in
// NextAttemptAt order (then enqueue order), at most each destination's room
// (ClaimsByDestinationRoom), and leased in one transaction: with FOR UPDATE
// SKIP LOCKED on PostgreSQL and MySQL, so concurrent claimers in many
// processes take disjoint rows without waiting on each other; under
// SQLite's single writer otherwise. Each claim's fencing token is the
// delivery's previous token plus one.
func (s *Store) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	if p.LeaseFor <= 0 {
		return nil, errors.New("hooksql: claim: LeaseFor must be positive")
	}
	now, err := encTime("Now", p.Now)
	if err != nil {
		return nil, err
	}
	expires, err := encTime("lease expiry", p.Now.Add(p.LeaseFor))
	if err != nil {
		return nil, err
	}
	s.warmed.Do(func() { s.warmPool(ctx) })
	from, args := s.claimCandidates(p, now)
	byRoom := p.DefaultDestinationRoom > 0 || len(p.DestinationRoom) > 0
	if s.dialect != MySQL {
		return s.claimInOneStatement(ctx, from, args, p, now, expires)
	}
	candidates := s.q("SELECT id, destination_id" + from)
	full := s.q("SELECT " + selectDeliveryCols + from)

	var claims []hookrelay.Claim
	err = s.inTx(ctx, "claim", func(q querier) error {
		claims = claims[:0]
		var rows *sql.Rows
		if byRoom {
			ids, err := s.pickByRoom(ctx, q, candidates, args, p)
			if err != nil || len(ids) == 0 {
				return err
			}
			// The picked rows are locked by this transaction already.
			idArgs := make([]any, len(ids))
			for i, id := range ids {
				idArgs[i] = id
			}
			rows, err = q.QueryContext(ctx, s.q("SELECT "+selectDeliveryCols+" FROM {d} WHERE id IN ("+placeholders(len(ids))+")"+
				" ORDER BY next_attempt_at, {seq}"), idArgs...)
			if err != nil {
				return s.dbErr("claim", err)
			}
		} else {
			var err error
			if rows, err = q.QueryContext(ctx, full, args...); err != nil {
				return s.dbErr("claim", err)
			}
		}
		var bad []string
		for rows.Next() {
			d, token, err := scanDelivery(rows)
			var de *DecodeError
			if errors.As(err, &de) {
				bad = append(bad, de.DeliveryID)
				continue
			}
			if err != nil {
				rows.Close()
				return s.dbErr("claim", err)
			}
			claims = append(claims, hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{
				Token: token + 1, Holder: p.Holder, ExpiresAt: decTime(expires),
			}})
		}
		if err := rows.Err(); err != nil {
			return s.dbErr("claim", err)
		}
		rows.Close()
		if len(claims) > 0 {
			args := []any{p.Holder, expires}
			for _, c := range claims {
				args = append(args, c.Delivery.ID)
			}
			if _, err := q.ExecContext(ctx, s.q("UPDATE {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?"+
				" WHERE id IN ("+placeholders(len(claims))+")"), args...); err != nil {
				return s.dbErr("claim", err)
			}
		}
		if len(bad) > 0 {
			return s.deadLetterUndecodable(ctx, q, bad, now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// claimStatement is the UPDATE … RETURNING that claims on PostgreSQL, and
// on SQLite when the claim has no rooms (claimStatementsSQLite otherwise),
// with its values.
//
// On PostgreSQL its text does not vary with the claim: the rooms travel as
// one JSON object and the skipped destinations as one JSON array
// (claimCandidates). pgx prepares every statement text it has not seen on a
// connection and keeps up to 512 of them, plan and all, in the server
// process. A text with a placeholder per room and per skipped destination
// was another statement for every number of them: with a few hundred
// destinations, tens of statements of about 1 MB each on every connection
// that claims (TestPostgresClaimIsOneStatementWhateverTheRooms).
func (s *Store) claimStatement(from string, args []any, p hookrelay.ClaimParams, expires int64) (string, []any) {
	if s.dialect == SQLite {
		return s.claimStatementSQLite(from, args, p, expires)
	}
	var b strings.Builder
	b.WriteString("WITH cand AS (SELECT ctid AS tid, destination_id, next_attempt_at, {seq} AS cseq" + from + ")")
	if p.DefaultDestinationRoom > 0 || len(p.DestinationRoom) > 0 {
		room := p.DefaultDestinationRoom
		if room <= 0 {
			room = math.MaxInt32
		}
		b.WriteString(", ranked AS (SELECT tid, next_attempt_at, cseq, destination_id," +
			" ROW_NUMBER() OVER (PARTITION BY destination_id ORDER BY next_attempt_at, cseq) AS rn FROM cand)" +
			", rooms AS (SELECT key AS destination_id, CAST(value AS BIGINT) AS room FROM json_each_text(CAST(CAST(? AS TEXT) AS JSON)))" +
			", pick AS (SELECT ranked.tid FROM ranked LEFT JOIN rooms ON rooms.destination_id = ranked.destination_id" +
			" WHERE rn <= COALESCE(rooms.room, CAST(? AS BIGINT)) ORDER BY next_attempt_at, cseq LIMIT ?)")
		args = append(args, jsonRooms(p.DestinationRoom), room, p.Limit)
	} else {
		b.WriteString(", pick AS (SELECT tid FROM cand)")
	}
	// The picked rows as one array of their row addresses (ctid), which
	// the update fetches directly (a TID scan), rather than looking each
	// picked ID up in the primary key again (id = ANY(…), one index descent
	// per row) or joining pick (id IN (SELECT …): a de-duplication of pick
	// and a nested loop). An address is the row's current version: cand
	// locked it (FOR UPDATE SKIP LOCKED, following a concurrent update to
	// the newest version), so nothing else can update it before this
	// statement does, and the statement's own snapshot keeps that version
	// from being pruned and its slot reused. Timed on the server (EXPLAIN
	// (ANALYZE, TIMING OFF) of the generic plan, 70 of 20,000 queued,
	// rolled back, 60 alternated runs): median 690 µs per claim by key,
	// 508 µs by address.
	b.WriteString(" UPDATE {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?" +
		" WHERE ctid = ANY(ARRAY(SELECT tid FROM pick)) RETURNING " + selectDeliveryCols + ", {seq}")
	args = append(args, p.Holder, expires)
	return s.q(b.String()), args
}

// claimCandidates is the FROM … LIMIT ? clause that picks a claim's due
// candidates, with its values.
func (s *Store) claimCandidates(p hookrelay.ClaimParams, now int64) (string, []any) {
	var b strings.Builder
	// Deliveries to a destination this store knows as paused or disabled
	// are not claimed at all, in any process: they wait without a claim,
	// a release or an attempt until it is resumed.
	b.WriteString(" FROM {d} WHERE state = 'pending' AND next_attempt_at <= ?" +
		" AND (lease_expires_at IS NULL OR lease_expires_at <= ?) AND envelope_version <= ?" +
		" AND destination_id NOT IN (SELECT id FROM {dst} WHERE paused <> 0 OR disabled <> 0)" +
		// Nor, until then, those a guard holds (Retry-After, rate limit,
		// open circuit), so a held backlog takes no claim places.
		" AND destination_id NOT IN (SELECT destination_id FROM {g} WHERE claimable_at > ?)")
	args := []any{now, now, hookrelay.EnvelopeVersion, now}
	// A destination with no room is skipped like one the caller skips, so
	// its backlog at the head of the queue takes no candidate places.
	skip := slices.Clone(p.SkipDestinations)
	for id, room := range p.DestinationRoom {
		if room <= 0 {
			skip = append(skip, id)
		}
	}
	// On SQLite and PostgreSQL the condition is there even when nothing
	// is skipped, so that the statement's text is fixed and prepared once
	// (claimStatementSQLite, claimStatement).
	cond, skipArgs := s.notInIDs("destination_id", skip)
	b.WriteString(cond)
	args = append(args, skipArgs...)
	if s.dialect == SQLite {
		// Not a bare LIMIT ?: SQLite's planner reads a bare limit's bound
		// value, so the statement is compiled again whenever the value
		// changes, and a worker's claims ask for whatever it has free. With
		// the limit's value hidden from the planner the statement is
		// compiled once (TestSQLiteClaimIsNotRecompiledForItsLimit); its
		// plan is the same (TestClaimWalksTheDueIndexWhateverTheBacklog).
		b.WriteString(" ORDER BY next_attempt_at, {seq} LIMIT CAST(? AS INTEGER)")
	} else {
		b.WriteString(" ORDER BY next_attempt_at, {seq} LIMIT ?" + s.lockSuffix(true))
	}
	limit := p.Limit
	if p.DefaultDestinationRoom > 0 || len(p.DestinationRoom) > 0 {
		limit = min(p.Limit*candidatesPerClaim, p.Limit+maxClaimCandidates)
	}
	args = append(args, limit)
	return b.String(), args
}

// claimStatementSQLite is claimStatement on SQLite for a claim without
// rooms: every candidate is taken. A claim with rooms runs
// claimStatementsSQLite's two statements instead.
func (s *Store) claimStatementSQLite(from string, args []any, p hookrelay.ClaimParams, expires int64) (string, []any) {
	return s.qpRows("WITH cand AS (SELECT id" + from + ")" +
		// OR FAIL: a failing row fails the claim, whose transaction is
		// rolled back, so the statement needs no journal of its own to undo
		// its part: without it SQLite wrote every page the claim changed to
		// a statement journal as well (a multi-row UPDATE inside a
		// transaction).
		" UPDATE OR FAIL {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?" +
		" WHERE id IN (SELECT id FROM cand) RETURNING " + selectDeliveryCols + ", {seq}"), append(args, p.Holder, expires)
}

// claimStatementsSQLite are a SQLite claim with rooms: the candidates (IDs
// and destinations, oldest first), from which pickByRoom keeps each
// destination's room, and the update of the picked IDs (one JSON array),
// run in one write transaction (BEGIN IMMEDIATE: no other writer comes
// between them). Their texts do not vary with the claim, so each is
// compiled once per connection (qpRows). One statement that ranked the
// candidates itself (ROW_NUMBER per destination over a JSON object of
// rooms) took 1.24 ms to choose 50 of 100 candidates where reading them
// took 0.3 ms; the claims' CPU per delivery in
// BenchmarkClaimAndRecordBatch/sqlite went from 52.9 to 44.7 µs (medians).
func (s *Store) claimStatementsSQLite(from string) (candidates, update string) {
	return s.qpRows("SELECT id, destination_id" + from),
		s.qpRows("UPDATE OR FAIL {d} SET lease_token = lease_token + 1, lease_holder = ?, lease_expires_at = ?" +
			" WHERE id IN (SELECT value FROM json_each(?)) RETURNING " + selectDeliveryCols + ", {seq}")
}

// jsonRooms is the rooms above zero (a destination without room is skipped
// instead: claimCandidates) as one JSON object, leaving out the IDs that are
// not valid UTF-8, as jsonIDs does.
func jsonRooms(rooms map[string]int) string {
	valid := make(map[string]int, len(rooms))
	for id, room := range rooms {
		if room > 0 && utf8.ValidString(id) {
			valid[id] = room
		}
	}
	j, _ := json.Marshal(valid) // string keys and ints always encode
	return string(j)
}

// notInIDs is the condition " AND col NOT IN (ids)" with its values. On
// SQLite and PostgreSQL the IDs go as one JSON value whatever their number
// (a text any PostgreSQL driver can send), so that the text does not vary
// with them and a caller's skip list can be longer than a statement takes
// parameters (32,766 on SQLite, 65,535 on PostgreSQL); there it is
// returned for no IDs too. On MySQL each ID is a parameter, and no IDs is
// no condition.
func (s *Store) notInIDs(col string, ids []string) (string, []any) {
	switch {
	case s.dialect == SQLite:
		return " AND " + col + " NOT IN (SELECT value FROM json_each(?))", []any{jsonIDs(ids)}
	case s.dialect == Postgres:
		return " AND " + col + " NOT IN (SELECT value FROM json_array_elements_text(CAST(CAST(? AS TEXT) AS JSON)))", []any{jsonIDs(ids)}
	case len(ids) == 0:
		return "", nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return " AND " + col + " NOT IN (" + placeholders(len(ids)) + ")", args
}

// jsonIDs is ids as a JSON array, leaving out those that are not valid
// UTF-8: no stored ID is (CheckStorable), and JSON would change them.
func jsonIDs(ids []string) string {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if utf8.ValidString(id) {
			valid = append(valid, id)
		}
	}
	j, _ := json.Marshal(valid) // strings always encode
	return string(j)
}

// claimInOneStatement is Claim on PostgreSQL and SQLite. On PostgreSQL it
// is one UPDATE … RETURNING whose CTEs pick the due candidates (locked,
// skipping rows other claimers hold), rank them per destination and keep
// each destination's room — one round trip and one commit, where a claim is
// the worker's only serial step. On SQLite the UPDATE … RETURNING leases
// the candidates themselves when the claim has no rooms, and the IDs
// pickByRoom kept from them when it has (claimStatementsSQLite), in one
// transaction either way. from is the candidates' FROM … LIMIT ? clause and
// args its values.
func (s *Store) claimInOneStatement(ctx context.Context, from string, args []any, p hookrelay.ClaimParams, now, expires int64) ([]hookrelay.Claim, error) {
	// On SQLite a claim with rooms picks in Go between two statements
	// (claimStatementsSQLite).
	pickFirst := s.dialect == SQLite && (p.DefaultDestinationRoom > 0 || len(p.DestinationRoom) > 0)
	candArgs := args
	var query string
	if !pickFirst {
		query, args = s.claimStatement(from, args, p, expires)
	}

	type claimed struct {
		c   hookrelay.Claim
		seq int64
	}
	// Limit is what the worker could take (up to eight rounds of its
	// slots); a claim returns what is due, often a fraction of it, and at
	// about 350 bytes a claimed row, an array sized for the Limit was most
	// of a claim's garbage. append grows it past this when more come.
	got := make([]claimed, 0, min(p.Limit, 64))
	var bad []string
	// add takes one row's decoding: a claim, or an undecodable row to move
	// aside, or a failure.
	add := func(d hookrelay.Delivery, token, seq int64, err error) error {
		var de *DecodeError
		if errors.As(err, &de) {
			bad = append(bad, de.DeliveryID)
			return nil
		}
		if err != nil {
			return s.dbErr("claim", err)
		}
		// RETURNING shows the row after the update: token is the new one.
		got = append(got, claimed{seq: seq, c: hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{
			Token: token, Holder: p.Holder, ExpiresAt: decTime(expires),
		}}})
		return nil
	}
	read := func(rows *sql.Rows) error {
		got, bad = got[:0], bad[:0]
		for rows.Next() {
			var seq int64
			d, token, err := scanDelivery(rows, &seq)
			if err := add(d, token, seq, err); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return s.dbErr("claim", err)
		}
		return nil
	}
	readPgx := func(rows pgx.Rows) error {
		got, bad = got[:0], bad[:0]
		r := newPgxDeliveryReader()
		for rows.Next() {
			var d hookrelay.Delivery
			token, seq, err := r.read(rows, &d)
			if err := add(d, token, seq, err); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return s.dbErr("claim", err)
		}
		return nil
	}
	err := errNotPgx
	if s.dialect == Postgres {
		err = s.claimPipelined(ctx, query, args, readPgx)
		if err == nil && len(bad) > 0 {
			// Leased to this claim already: nobody else takes them
			// meanwhile. The claim has committed, so neither ctx nor a
			// failure here may turn it into an error, which would hide
			// the leases it holds on the deliveries it read
			// (TestClaimThatCannotDeadLetterStrandsNoLease): a failed move
			// leaves the undecodable rows pending under this claim's
			// lease, and a claim after its end moves them.
			dlCtx := context.WithoutCancel(ctx)
			_ = s.inTx(dlCtx, "claim", func(q querier) error { return s.deadLetterUndecodable(dlCtx, q, bad, now) })
		}
	}
	if errors.Is(err, errNotPgx) {
		err = s.inTx(ctx, "claim", func(q querier) error {
			if err := s.planSettings(ctx, q, pgClaimSettings, "claim"); err != nil {
				return err
			}
			query, args := query, args
			if pickFirst {
				candidates, update := s.claimStatementsSQLite(from)
				ids, err := s.pickByRoom(ctx, q, candidates, candArgs, p)
				if err != nil {
					return err
				}
				if len(ids) == 0 {
					got, bad = got[:0], bad[:0]
					return nil
				}
				query, args = update, []any{p.Holder, expires, jsonIDs(ids)}
			}
			rows, err := q.QueryContext(ctx, query, args...)
			if err != nil {
				return s.dbErr("claim", err)
			}
			defer rows.Close()
			if err := read(rows); err != nil {
				return err
			}
			rows.Close()
			if len(bad) > 0 {
				return s.deadLetterUndecodable(ctx, q, bad, now)
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	// Oldest first, as the statement chose them: sorted by index, so the
	// claims are moved once.
	order := make([]int, len(got))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		return cmp.Or(got[x].c.Delivery.NextAttemptAt.Compare(got[y].c.Delivery.NextAttemptAt), cmp.Compare(got[x].seq, got[y].seq))
	})
	claims := make([]hookrelay.Claim, len(got))
	for i, k := range order {
		claims[i] = got[k].c
	}
	return claims, nil
}

// pgClaimSettings and pgWriteSettings are the plan settings (planSettings)
// of a claim's and of a ledger write's transaction on PostgreSQL, for that
// transaction only. They are set_config, not SET LOCAL: in a pipeline's
// implicit transaction PostgreSQL applies SET LOCAL too, but answers it
// with a warning ("SET LOCAL can only be used in transaction blocks") in
// the server's log, every time.
const (
	pgClaimSettings = "SELECT set_config('enable_bitmapscan', 'off', true)," +
		" set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
	pgWriteSettings = "SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"
)

// claimPipelined runs a claim on PostgreSQL as one pipeline — the plan
// setting (planSettings) and the claim statement in one implicit
// transaction — so a claim costs one round trip instead of four (begin,
// setting, statement, commit). On a busy machine each round trip is also a
// wait for the scheduler, and the claim is the worker's one serial step.
// read scans the claimed rows.
//
// The pipeline is its own commit, so ctx is honoured until it is sent and
// not while its rows are read (sendPipeline), as for every pipeline:
// PostgreSQL can commit the claim before pgx notices ctx is done, and an
// error then left its deliveries leased to no one, delayed until the
// lease ran out. Reading to the end keeps a claim all or nothing as the
// caller sees it, with nothing to undo; releasing the leases after such an
// error instead would be a second write, which can fail or be cut short
// in turn (TestClaimCancelledMidwayLeasesAllOrNothing). If read fails
// for another reason once the pipeline is sent, the claim has committed
// anyway and its leases run out unused.
func (s *Store) claimPipelined(ctx context.Context, query string, args []any, read func(pgx.Rows) error) error {
	return s.withPgxConn(ctx, "claim", func(c *pgx.Conn) error {
		br, err := s.sendWithSettings(ctx, c, pgClaimSettings, "claim", func(b *pgx.Batch) { b.Queue(query, args...) })
		if err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return s.dbErr("claim", err)
		}
		err = read(rows)
		rows.Close()
		if err == nil && rows.Err() != nil {
			err = s.dbErr("claim", rows.Err())
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			err = s.dbErr("claim: commit", cerr)
		}
		return err
	})
}

// sendWithSettings sends settings and then what queue adds as one pipeline
// on c (sendPipeline), and reads the settings' result: the caller reads the
// rest and closes the results. On error the results are closed already.
func (s *Store) sendWithSettings(ctx context.Context, c *pgx.Conn, settings, op string, queue func(*pgx.Batch)) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.Queue(settings)
	queue(b)
	br, err := s.sendPipeline(ctx, c, op, b)
	if err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, s.dbErr(op, err)
	}
	return br, nil
}

// sendPipeline sends b on c as one pipeline, which PostgreSQL runs as one
// implicit transaction ending in its own commit; every pipeline the Store
// sends goes through here. ctx is honoured up to the send (an error if it
// is done then: nothing was sent), not while the results are read:
// PostgreSQL can commit the pipeline before pgx, reading the results,
// notices ctx is done, and an error then would report a stored write as
// not made (a claim's leases held by no one who knows of them, a delivered
// record the worker would send again). So, as a COMMIT inTx has sent, it
// is not cut short once sent: the pipeline's error says nothing was
// stored, its success that all was (TestWriteCancelledOnceItsCommitIsSent).
func (s *Store) sendPipeline(ctx context.Context, c *pgx.Conn, op string, b *pgx.Batch) (pgx.BatchResults, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.dbErr(op, err)
	}
	return c.SendBatch(context.WithoutCancel(ctx), b), nil
}

// planSettings steers the plans of a claim's or a ledger write's
// transaction, so that they do not depend on the table's statistics. On
// PostgreSQL:
//
//   - Bitmap scans off, in a claim: a table whose statistics predate its
//     backlog (a burst enqueued since the last ANALYZE, or a new table)
//     makes the planner think few rows are due, and it then picks a bitmap
//     scan that reads every pending row and sorts them — work that grows
//     with the backlog, on every claim. The due index already yields rows in claim
//     order, so the index scan stops after LIMIT rows whatever the backlog.
//   - Sequential scans off: pgx prepares each statement once per
//     connection, and PostgreSQL soon plans it once for any values and keeps
//     that plan until the table's statistics change. Planned while the table
//     held a few rows, the claim's update found its picked IDs by reading
//     the whole table, and a ledger write its one row, every time, as the
//     table grew (in peerbench 15,000 rows a claim, and 1 ms of server time
//     became 18). With them off the claim fetches its rows by address and
//     a ledger write finds its row by key
//     (TestClaimPlannedOnAYoungTableStillUpdatesByAddress,
//     TestLedgerWritePlannedOnAYoungTableFindsItsRowByKey). The small tables
//     a claim reads (destinations, guards) are still read whole where no
//     index serves, as before.
//   - JIT off: a plan that still holds a sequential scan is costed past
//     jit_above_cost once they are off, and PostgreSQL then compiles the
//     statement with LLVM each time it runs it — about half a second a
//     claim.
//
// A ledger write keeps bitmap scans: one over the primary key reads just
// the batch's rows. With them off too, peerbench's batches joined their 50
// rows to the table's by comparing every pair (a nested loop, 2,450
// comparisons, where they now take a hash join): the batches' executor CPU
// on the server was 1,912 / 1,634 ms per 15,000 deliveries against 1,139 /
// 922 ms with bitmap scans kept (log_executor_stats, two runs each).
// claimPipelined sends pgClaimSettings, the ledger writes' pipelines
// pgWriteSettings.
func (s *Store) planSettings(ctx context.Context, q querier, settings, op string) error {
	if s.dialect != Postgres {
		return nil
	}
	if _, err := q.ExecContext(ctx, settings); err != nil {
		return s.dbErr(op, err)
	}
	return nil
}

// deadLetterUndecodable moves claimed rows that could not be decoded to
// the dead-letter path, for an operator.
func (s *Store) deadLetterUndecodable(ctx context.Context, q querier, ids []string, now int64) error {
	args := []any{ReasonUndecodable, now, now}
	for _, id := range ids {
		args = append(args, id)
	}
	if _, err := q.ExecContext(ctx, s.q("UPDATE {d} SET state = 'dead', last_reason = ?, updated_at = ?, dead_lettered_at = ?,"+
		" lease_token = lease_token + 1, lease_expires_at = NULL WHERE id IN ("+placeholders(len(ids))+")"), args...); err != nil {
		return s.dbErr("claim: dead-letter undecodable", err)
	}
	return nil
}

// pickByRoom reads the due candidates (IDs and destinations, oldest first)
// and keeps, in order, at most each destination's room and p.Limit in all.
func (s *Store) pickByRoom(ctx context.Context, q querier, query string, args []any, p hookrelay.ClaimParams) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.dbErr("claim", err)
	}
	defer rows.Close()
	var ids []string
	taken := map[string]int{}
	for rows.Next() {
		var id, dest string
		if err := rows.Scan(&id, &dest); err != nil {
			return nil, s.dbErr("claim", err)
		}
		if len(ids) == p.Limit {
			break
		}
		room, ok := p.DestinationRoom[dest]
		if !ok {
			room = p.DefaultDestinationRoom
		}
		if room > 0 && taken[dest] >= room || (ok && room == 0) {
			continue
		}
		taken[dest]++
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("claim", err)
	}
	return ids, nil
}

// endLease runs a queue transition: update (which must end the lease) the
// row whose current lease is the caller's. It reads the row first: the
// ledger writes that precede Acknowledge, RetryAt and DeadLetter already
// ended the lease in the same write (the row is the queue entry), so those
// transitions cost a read, not a second commit. The read also tells apart an
// unknown delivery (ErrNotFound), a lost lease (ErrLeaseLost) and a repeated
// call with the current lease, which is a no-op.
func (s *Store) endLease(ctx context.Context, op, id string, lease hookrelay.Lease, update string, args ...any) error {
	var (
		token   int64
		expires sql.NullInt64
	)
	key := lookupID(id)
	err := s.db.QueryRowContext(ctx, s.q("SELECT lease_token, lease_expires_at FROM {d} WHERE id = ?"), key).Scan(&token, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("hooksql: %s %s: %w", op, errtext.Quote(id), hookrelay.ErrNotFound)
	case err != nil:
		return s.dbErr(op+" "+errtext.Quote(id), err)
	case token != lease.Token || lease.Token == 0:
		return fmt.Errorf("hooksql: %s %s: lease token %d is not the current one: %w", op, errtext.Quote(id), lease.Token, hookrelay.ErrLeaseLost)
	case !expires.Valid:
		return nil // the lease already ended
	}
	res, err := s.db.ExecContext(ctx, s.q(update+" WHERE id = ? AND lease_token = ?"), append(args, key, lease.Token)...)
	if err != nil {
		return s.dbErr(op+" "+errtext.Quote(id), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.dbErr(op+" "+errtext.Quote(id), err)
	} else if n > 0 {
		return nil
	}
	// Nothing changed: a claim took the row over since the read, or (MySQL
	// counts changed rows, not matched ones) the update was a no-op.
	if err := s.db.QueryRowContext(ctx, s.q("SELECT lease_token FROM {d} WHERE id = ?"), key).Scan(&token); err != nil {
		return s.dbErr(op+" "+errtext.Quote(id), err)
	}
	if token != lease.Token {
		return fmt.Errorf("hooksql: %s %s: lease token %d is not the current one: %w", op, errtext.Quote(id), lease.Token, hookrelay.ErrLeaseLost)
	}
	return nil
}

// Acknowledge implements hookrelay.Queue.
func (s *Store) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	return s.endLease(ctx, "acknowledge", p.ID, p.Lease, "UPDATE {d} SET lease_expires_at = NULL")
}

// RetryAt implements hookrelay.Queue. The ledger write (RecordRetry) already
// advanced the attempt; this ends the lease and sets the due time.
func (s *Store) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	at, err := encTime("At", p.At)
	if err != nil {
		return err
	}
	return s.endLease(ctx, "retry at", p.Delivery.ID, p.Lease,
		"UPDATE {d} SET next_attempt_at = CASE WHEN state = 'pending' THEN ? ELSE next_attempt_at END, lease_expires_at = NULL", at)
}

// DeadLetter implements hookrelay.Queue. The ledger row already says dead;
// the dead-letter path is that state, so this ends the lease.
func (s *Store) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	return s.endLease(ctx, "dead letter", p.Delivery.ID, p.Lease, "UPDATE {d} SET lease_expires_at = NULL")
}

// Release implements hookrelay.Queue. A lease already ended is not
// rescheduled again. On PostgreSQL a release with Announce (what a worker
// hands back when it stops) is then announced to listening workers
// (ListenDue), due at At; the others are not, so that the releases of a
// destination without room wake no one.
func (s *Store) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	at, err := encTime("At", p.At)
	if err != nil {
		return err
	}
	// next_attempt_at is assigned first: MySQL evaluates SET left to right
	// with the new values, and it must see the lease as it was.
	if err := s.endLease(ctx, "release", p.ID, p.Lease,
		"UPDATE {d} SET next_attempt_at = CASE WHEN state = 'pending' AND lease_expires_at IS NOT NULL THEN ? ELSE next_attempt_at END,"+
			" lease_expires_at = NULL", at); err != nil {
		return err
	}
	if p.Announce {
		// After the write, in a statement of its own, as RecordRetry
		// announces: a lost announcement costs a listening worker
		// latency (it polls), never the delivery.
		_ = s.notifyDue(ctx, s.db, p.At)
	}
	return nil
}
