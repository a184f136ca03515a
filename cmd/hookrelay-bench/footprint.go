package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/hookrelay/hookrelay/internal/benchenv"
)

var heapMetrics = []string{
	"/memory/classes/heap/objects:bytes", // in use by objects, live or not yet swept
	"/memory/classes/heap/unused:bytes",  // in spans with objects, free (with the above: HeapInuse)
	"/gc/heap/live:bytes",                // marked live by the last GC
}

// readHeap returns the heap in use (as MemStats.HeapInuse) and the live heap
// as of the last GC.
func readHeap() (inuse, live uint64) {
	s := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64(), s[2].Value.Uint64()
}

// liveAfterGC collects garbage twice (the second pass settles what the first
// finalized) and returns the live heap.
func liveAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	_, live := readHeap()
	return live
}

type footprint struct {
	bytesPerPending float64
	heldLive        uint64
	drainPeakLive   uint64
	drainPeakInuse  uint64
	drainThroughput float64
}

// memoryFootprint holds o.pending deliveries in a fresh memory adapter and
// measures the live heap they take, then starts the worker and samples the
// heap while it delivers them all.
func memoryFootprint(ctx context.Context, o options, rcpt *recipient, payload []byte) (footprint, error) {
	var f footprint
	store, err := benchenv.Open(ctx, "memory", benchenv.Options{})
	if err != nil {
		return f, err
	}
	defer store.Close()
	watch := &deliveredWatch{}
	client, sender, err := newClient(ctx, store, o, rcpt, watch)
	if err != nil {
		return f, err
	}
	defer sender.CloseIdleConnections()

	before := liveAfterGC()
	if err := enqueueBatch(ctx, client, "pending", o.pending, o.destinations, payload); err != nil {
		return f, err
	}
	f.heldLive = liveAfterGC()
	f.bytesPerPending = float64(int64(f.heldLive)-int64(before)) / float64(o.pending)

	reached := watch.expect(o.pending)
	sampler := startHeapSampler()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return f, err
	}
	err = waitReached(reached, watch, o.pending)
	f.drainThroughput = float64(o.pending) / time.Since(start).Seconds()
	_ = client.Stop(ctx)
	f.drainPeakInuse, f.drainPeakLive = sampler.finish()
	return f, err
}
