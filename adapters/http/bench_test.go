package hookhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookrelay/hookrelay"
)

// benchParams is one delivery as the durable-throughput benchmarks send
// it: a 512-byte payload, one whsec_ secret and one destination header.
func benchParams(url string) hookrelay.SendParams {
	p := sendParams(url, `{"data":"`+strings.Repeat("x", 512-11)+`"}`)
	p.Destination.Headers = map[string]string{"Authorization": "Bearer tok_0123456789abcdef"}
	return p
}

// BenchmarkSend is one delivery to a loopback receiver answering 204: the
// whole cost of Sender.Send, the transport and the server included.
func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s, err := New(Config{AllowNetworks: loopback})
	if err != nil {
		b.Fatal(err)
	}
	defer s.CloseIdleConnections()
	p := benchParams(srv.URL + "/hooks")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, p); res.Kind != hookrelay.KindDelivered {
			b.Fatalf("%+v", res)
		}
	}
}

// roundTripFunc answers requests without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkSendOverhead is Sender.Send with a transport that answers 204
// at once: the sender's own cost (URL, headers, signing, context,
// snippet, classification) without the network's noise.
func BenchmarkSendOverhead(b *testing.B) {
	s, err := New(Config{AllowNetworks: loopback})
	if err != nil {
		b.Fatal(err)
	}
	s.rt = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: http.StatusNoContent, Header: http.Header{},
			Body: http.NoBody, Request: r,
		}, nil
	})
	p := benchParams("http://127.0.0.1:1/hooks")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, p); res.Kind != hookrelay.KindDelivered {
			b.Fatalf("%+v", res)
		}
	}
}
