package main

import "time"

// heapSampler samples the heap every 10 ms until stopped and keeps the
// peaks. It reads runtime/metrics, which does not stop the world.
type heapSampler struct {
	stop      chan struct{}
	done      chan struct{}
	peakInuse uint64
	peakLive  uint64
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			inuse, live := readHeap()
			s.peakInuse, s.peakLive = max(s.peakInuse, inuse), max(s.peakLive, live)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the peaks: heap in use (HeapInuse:
// spans holding objects) and live heap (marked live by the last GC).
func (s *heapSampler) finish() (inuse, live uint64) {
	close(s.stop)
	<-s.done
	return s.peakInuse, s.peakLive
}
