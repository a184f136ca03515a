package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// deliverArgs is the River job: one payload to post to one destination.
type deliverArgs struct {
	ID      string          `json:"id"`
	Dest    int             `json:"dest"`
	Payload json.RawMessage `json:"payload"`
}

func (deliverArgs) Kind() string { return "peerbench_deliver" }

// deliverWorker posts each job's payload to its destination on the
// receiver with a plain net/http client, and fails the job unless the
// answer is 2xx.
type deliverWorker struct {
	river.WorkerDefaults[deliverArgs]
	url    string
	client *http.Client
}

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[deliverArgs]) error {
	return post(ctx, w.client, w.url+destPath(job.Args.Dest), job.Args.ID, job.Args.Payload)
}

// riverConfig is River's Config as its README shows, with FetchCooldown
// set for the "river-1ms" system and left at River's default (100 ms)
// otherwise. With a worker, the default queue runs MaxWorkers w.
func riverConfig(system, schema string, worker *deliverWorker, w int) *river.Config {
	cfg := &river.Config{Schema: schema}
	if system == "river-1ms" {
		cfg.FetchCooldown = time.Millisecond
	}
	if worker != nil {
		workers := river.NewWorkers()
		river.AddWorker(workers, worker)
		cfg.Workers = workers
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: w}}
	}
	return cfg
}

// riverSchema names a fresh schema for one River system in this run.
func riverSchema(system string) string {
	return fmt.Sprintf("peerbench_%d_%s", os.Getpid(), strings.ReplaceAll(system, "-", "_"))
}

// createRiverSchema creates the schema and runs River's migrations in it;
// the returned function drops it.
func createRiverSchema(ctx context.Context, pool *pgxpool.Pool, schema string) (drop func() error, err error) {
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop = func() error {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
		return err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("river migrations: %w", err), drop())
	}
	return drop, nil
}

// riverSystem is a River client with its own pool (pgxpool's defaults) and
// schema.
type riverSystem struct {
	pool     *pgxpool.Pool
	client   *river.Client[pgx.Tx]
	dropped  func() error
	tr       *http.Transport
	progress *progress
	payload  []byte
	dests    int
	seq      int
}

func openRiver(ctx context.Context, system string, o options, url string, payload []byte) (_ *riverSystem, err error) {
	s := &riverSystem{progress: &progress{}, payload: payload, dests: o.destinations, tr: newTransport(o.workers)}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	if s.pool, err = pgxpool.New(ctx, o.postgresDSN); err != nil {
		return nil, err
	}
	schema := riverSchema(system)
	if s.dropped, err = createRiverSchema(ctx, s.pool, schema); err != nil {
		return nil, err
	}
	worker := &deliverWorker{url: url, client: &http.Client{Transport: s.tr}}
	s.client, err = river.NewClient(riverpgxv5.New(s.pool), riverConfig(system, schema, worker, o.workers))
	return s, err
}

func (s *riverSystem) drain(ctx context.Context, n int) (measured, error) {
	const batch = 1000
	params := make([]river.InsertManyParams, 0, batch)
	for i := range n {
		s.seq++
		params = append(params, river.InsertManyParams{Args: deliverArgs{ID: fmt.Sprintf("job_%d", s.seq), Dest: i % s.dests, Payload: s.payload}})
		if len(params) == batch || i == n-1 {
			if _, err := s.client.InsertManyFast(ctx, params); err != nil {
				return measured{}, err
			}
			params = params[:0]
		}
	}
	reached := s.progress.expect(n)
	// River sends an event once a job's completion is recorded; the
	// subscription closes when the client stops.
	events, cancel := s.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled, river.EventKindJobSnoozed},
	})
	defer cancel()
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		for e := range events {
			if e.Kind == river.EventKindJobCompleted {
				s.progress.delivered()
			} else {
				s.progress.failed(fmt.Sprintf("%s: %v", e.Kind, e.Job.Errors))
			}
		}
	}()
	sp := beginSpan()
	if err := s.client.Start(ctx); err != nil {
		return measured{}, err
	}
	err := s.progress.wait(ctx, reached)
	m := sp.end()
	err = errors.Join(err, s.client.Stop(context.Background()))
	cancel()
	<-counted
	return m, err
}

func (s *riverSystem) close() error {
	var errs []error
	if s.client != nil {
		errs = append(errs, s.client.Stop(context.Background()))
	}
	if s.dropped != nil {
		errs = append(errs, s.dropped())
	}
	if s.pool != nil {
		s.pool.Close()
	}
	s.tr.CloseIdleConnections()
	return errors.Join(errs...)
}

// riverLatency prepares the latency mode's producer side for a River
// system: a fresh schema and an insert-only client configured like the
// worker's; the worker is the child process.
func riverLatency(ctx context.Context, system string, o options, payload []byte) (enqueue func(ctx context.Context, i int) (string, error), childArgs []string, closeAll func() error, err error) {
	pool, err := pgxpool.New(ctx, o.postgresDSN)
	if err != nil {
		return nil, nil, nil, err
	}
	schema := riverSchema(system) + "_lat"
	drop, err := createRiverSchema(ctx, pool, schema)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	closeAll = func() error {
		err := drop()
		pool.Close()
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(system, schema, nil, 0))
	if err != nil {
		return nil, nil, nil, errors.Join(err, closeAll())
	}
	enqueue = func(ctx context.Context, i int) (string, error) {
		id := fmt.Sprintf("lat_%d", i)
		_, err := client.Insert(ctx, deliverArgs{ID: id, Dest: i % o.destinations, Payload: payload}, nil)
		return id, err
	}
	return enqueue, []string{"--child", system, "--child-namespace", schema}, closeAll, nil
}

// riverWorker is the latency mode's worker process for a River system.
func riverWorker(ctx context.Context, o options) (stop func() error, err error) {
	pool, err := pgxpool.New(ctx, o.postgresDSN)
	if err != nil {
		return nil, err
	}
	tr := newTransport(o.workers)
	worker := &deliverWorker{url: o.childReceiver, client: &http.Client{Transport: tr}}
	client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(o.child, o.childNamespace, worker, o.workers))
	if err == nil {
		err = client.Start(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return func() error {
		err := client.Stop(context.Background())
		tr.CloseIdleConnections()
		pool.Close()
		return err
	}, nil
}
