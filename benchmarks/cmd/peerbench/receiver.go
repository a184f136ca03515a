package main

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// receiver is the loopback HTTP server every system posts to. It answers
// 204 after reading the body and, while recording, keeps the first arrival
// time of each webhook-id.
type receiver struct {
	url      string
	srv      *http.Server
	done     chan struct{}
	requests atomic.Int64
	// conns counts connections accepted: a client that does not keep its
	// connections alive opens one per request.
	conns atomic.Int64

	mu       sync.Mutex
	arrivals map[string]time.Time // nil unless recording
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	r.srv = &http.Server{
		Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				r.conns.Add(1)
			}
		},
	}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // returns ErrServerClosed on close
	}()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	now := time.Now()
	r.requests.Add(1)
	r.mu.Lock()
	if r.arrivals != nil {
		id := req.Header.Get("webhook-id")
		if _, seen := r.arrivals[id]; !seen {
			r.arrivals[id] = now
		}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// record starts keeping first arrivals afresh.
func (r *receiver) record() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrivals = make(map[string]time.Time)
}

// stopRecording stops keeping arrivals and returns those kept.
func (r *receiver) stopRecording() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.arrivals
	r.arrivals = nil
	return a
}

// arrived reports how many distinct webhook-ids arrived while recording.
func (r *receiver) arrived() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.arrivals)
}

func (r *receiver) close() {
	_ = r.srv.Close()
	<-r.done
}
