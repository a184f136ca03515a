package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookrelay/hookrelay"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

type probe struct {
	*hooksql.Store
	claims, claimed, batches, written atomic.Int64
	claimNs, batchNs                  atomic.Int64
}

func (p *probe) Claim(ctx context.Context, cp hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	t := time.Now()
	cs, err := p.Store.Claim(ctx, cp)
	p.claimNs.Add(int64(time.Since(t)))
	p.claims.Add(1)
	p.claimed.Add(int64(len(cs)))
	return cs, err
}
func (p *probe) RecordBatch(ctx context.Context, w []hookrelay.LedgerWrite) ([]error, error) {
	t := time.Now()
	e, err := p.Store.RecordBatch(ctx, w)
	p.batchNs.Add(int64(time.Since(t)))
	p.batches.Add(1)
	p.written.Add(int64(len(w)))
	return e, err
}

func main() {
	ctx := context.Background()
	dialect, dsn := hooksql.Postgres, os.Getenv("HOOKRELAY_TEST_POSTGRES_DSN")
	var st *hooksql.Store
	var err error
	if len(os.Args) > 1 && os.Args[1] == "sqlite" {
		st, err = hooksql.OpenSQLite(ctx, "/tmp/probe.db", hooksql.Options{TablePrefix: fmt.Sprintf("p%d_", time.Now().Unix())})
	} else {
		st, err = hooksql.Open(ctx, dialect, dsn, hooksql.Options{TablePrefix: fmt.Sprintf("p%d_", time.Now().Unix())})
	}
	if err != nil {
		panic(err)
	}
	if err := st.Migrate(ctx); err != nil {
		panic(err)
	}
	for i := range 10 {
		st.Put(ctx, hookrelay.Destination{ID: fmt.Sprint("d", i), TenantID: "t", URL: "http://x"})
	}
	p := &probe{Store: st}
	var n atomic.Int64
	var wg sync.WaitGroup
	const N = 5000
	wg.Add(N)
	c, err := hookrelay.New(hookrelay.Config{Queue: p, Ledger: p, Destinations: p, Concurrency: 50,
		Sender: hookrelay.SenderFunc(func(ctx context.Context, sp hookrelay.SendParams) hookrelay.Result {
			time.Sleep(time.Millisecond)
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(ctx context.Context, e hookrelay.Event) {
			if e.Kind == hookrelay.EventDelivered {
				n.Add(1)
				wg.Done()
			}
			if e.Kind == hookrelay.EventWorkerError {
				fmt.Println(e.Err)
			}
		})})
	if err != nil {
		panic(err)
	}
	var ps []hookrelay.EnqueueParams
	for i := range N {
		ps = append(ps, hookrelay.EnqueueParams{EventID: fmt.Sprint("e", i), TenantID: "t", DestinationID: fmt.Sprint("d", i%10), EventType: "x", Payload: make([]byte, 512)})
	}
	for i := 0; i < N; i += 500 {
		if _, err := c.EnqueueMany(ctx, ps[i:i+500]); err != nil {
			panic(err)
		}
	}
	t := time.Now()
	c.Start(ctx)
	wg.Wait()
	el := time.Since(t)
	c.Stop(ctx)
	fmt.Printf("%d in %v = %.0f/s; claims %d (avg %.1f, %.2fms) batches %d (avg %.1f, %.2fms)\n", n.Load(), el, float64(N)/el.Seconds(),
		p.claims.Load(), float64(p.claimed.Load())/float64(p.claims.Load()), float64(p.claimNs.Load())/float64(p.claims.Load())/1e6,
		p.batches.Load(), float64(p.written.Load())/float64(p.batches.Load()), float64(p.batchNs.Load())/float64(p.batches.Load())/1e6)
}
