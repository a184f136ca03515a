package hooksql

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.DueNotifier = (*Store)(nil)

// dueChannel is the PostgreSQL notification channel of the Store's tables.
func (s *Store) dueChannel() string { return s.prefix + "due" }

// notifyDue announces, inside q's transaction (so at its commit), that work
// becomes due at at (zero: now, in the listener's own clock). Only
// PostgreSQL has announcements; elsewhere it does nothing.
func (s *Store) notifyDue(ctx context.Context, q querier, at time.Time) error {
	if s.dialect != Postgres {
		return nil
	}
	if _, err := q.ExecContext(ctx, "SELECT pg_notify($1, $2)", s.dueChannel(), duePayload(at)); err != nil {
		return s.dbErr("notify workers", err)
	}
	return nil
}

// duePayload encodes a due time as an announcement's payload: unix
// nanoseconds, or empty for "now".
func duePayload(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return strconv.FormatInt(at.UnixNano(), 10)
}

// minListenPool is the smallest pool the PostgreSQL listener takes a
// connection from: with fewer, holding one for the listener could starve
// the worker's own claims, and the worker polls instead.
const minListenPool = 4

// listenRetry is how often a listener refused a slot (listenSlot) looks
// again without being told one freed: the pool may have been resized
// (DB().SetMaxOpenConns).
const listenRetry = 5 * time.Second

// listenSlot reserves a pool connection for one more listener, if the
// listeners (one per worker on the Store) would still leave the pool
// minListenPool-1 connections for everything else; the caller gives it
// back with releaseListenSlot. Without the count, workers sharing a small
// pool each held one, and claims waited for a connection forever.
// Unless it reserved one, it returns the channel that releaseListenSlot
// closes next, taken under the same lock as the look, so no release
// between the look and the wait is missed.
func (s *Store) listenSlot() (freed <-chan struct{}, ok bool) {
	s.listenMu.Lock()
	defer s.listenMu.Unlock()
	if max := int64(s.db.Stats().MaxOpenConnections); max > 0 && max-(s.listeners+1) < minListenPool-1 {
		if s.listenFreed == nil {
			s.listenFreed = make(chan struct{})
		}
		return s.listenFreed, false
	}
	s.listeners++
	return nil, true
}

// releaseListenSlot gives back a slot listenSlot reserved and wakes the
// listeners waiting for one (waitListenSlot).
func (s *Store) releaseListenSlot() {
	s.listenMu.Lock()
	defer s.listenMu.Unlock()
	s.listeners--
	if s.listenFreed != nil {
		close(s.listenFreed)
		s.listenFreed = nil
	}
}

// waitListenSlot reserves a slot (listenSlot), waiting until one frees —
// another listener returns its own, or, checked every listenRetry, the
// pool grew — or ctx ends: then it reports false. Meanwhile the worker
// polls. Without the wait, a listener refused once polled for the rest of
// its life, even after the slot it needed was given back.
func (s *Store) waitListenSlot(ctx context.Context) bool {
	for {
		freed, ok := s.listenSlot()
		if ok {
			return true
		}
		t := time.NewTimer(listenRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// ListenDue implements hookrelay.DueNotifier. On PostgreSQL it holds one
// pooled connection LISTENing on the tables' channel (prefix + "due") and
// calls due for every announcement: deliveries created (Create, EnqueueTx),
// retries recorded (in a batch, or alone by RecordRetry), redriven deliveries, a resumed destination,
// releases with Announce (what a stopping worker hands back) —
// from any process sharing the tables — and once each time it starts
// listening, with a zero time (look now), for whatever was announced while
// no one listened. When the pool is too small for one more listener
// (listenSlot), it waits — the worker polling meanwhile — until another
// listener on the Store stops or the pool grows, then listens. On SQLite
// and MySQL, which have no announcements, it waits for ctx and the worker
// polls. It returns nil when ctx ends, or the connection's error.
func (s *Store) ListenDue(ctx context.Context, due func(at time.Time)) error {
	if s.dialect != Postgres {
		<-ctx.Done()
		return nil
	}
	if !s.waitListenSlot(ctx) {
		return nil
	}
	defer s.releaseListenSlot()
	err := s.withPgxConn(ctx, "listen", func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{s.dueChannel()}.Sanitize()); err != nil {
			return err
		}
		// What was announced before this LISTEN (before the first, or while
		// a lost connection was replaced) reached no one: look now.
		due(time.Time{})
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				// The connection holds a LISTEN; it must not go back to the
				// pool. Closing it ends the LISTEN with it.
				_ = c.Close(context.WithoutCancel(ctx))
				return err
			}
			at := time.Time{}
			if ns, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				at = time.Unix(0, ns)
			}
			due(at)
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	if err == errNotPgx {
		<-ctx.Done()
		return nil
	}
	return s.dbErr("listen", err)
}
