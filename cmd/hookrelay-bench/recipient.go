package main

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// recipient is the loopback HTTP server every request goes to. It answers
// 204 after reading the body.
type recipient struct {
	url      string
	srv      *http.Server
	done     chan struct{}
	requests atomic.Int64
}

func startRecipient() (*recipient, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recipient{url: "http://" + ln.Addr().String(), done: make(chan struct{})}
	r.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			_, _ = io.Copy(io.Discard, req.Body)
			r.requests.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // returns ErrServerClosed on close
	}()
	return r, nil
}

func (r *recipient) close() {
	_ = r.srv.Close()
	<-r.done
}
