package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
	"github.com/hookrelay/hookrelay/internal/benchenv"
)

// The two client-only systems split the gap between the ceiling and
// hookrelay memory into the HTTP send and the rest (worker, store, ledger):
//
//   - sender: hookhttp.Sender.Send from W goroutines, the request each
//     delivery makes (Standard Webhooks headers, a fresh HMAC signature,
//     the send's deadline), with no worker, queue or ledger;
//   - fasthttp: the same headers and signature sent with
//     github.com/valyala/fasthttp's client, whose requests are written and
//     read on the calling goroutine (net/http's transport hands each to a
//     connection's write and read goroutines): what another HTTP client
//     would change. Only here, in the benchmark module: the library sends
//     with net/http.

// clientLoop sends n requests from w goroutines, each with send(i) for i
// from 1 to n, and times them.
func clientLoop(n, w int, send func(i int) error) (measured, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, w)
	sp := beginSpan()
	for range w {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if err := send(int(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	m := sp.end()
	close(errs)
	return m, <-errs
}

// senderOnly is the "sender" system.
type senderOnly struct {
	sender  *hookhttp.Sender
	dests   []hookrelay.Destination
	payload []byte
	w       int
	seq     atomic.Int64
}

func newSenderOnly(url string, payload []byte, w, dests int) (*senderOnly, error) {
	sender, err := benchenv.LoopbackSender(hookhttp.Config{})
	if err != nil {
		return nil, err
	}
	s := &senderOnly{sender: sender, payload: payload, w: w}
	// The destinations the hookrelay systems store, kept here instead.
	err = putDestinations(context.Background(), func(_ context.Context, d hookrelay.Destination) error {
		s.dests = append(s.dests, d)
		return nil
	}, url, dests)
	return s, err
}

// deliveryIDs derives the IDs of the next n requests (request i, from 1,
// goes to destination i mod dests) before the timed loop: in the hookrelay
// systems the ID is derived at enqueue, outside it.
func deliveryIDs(seq *atomic.Int64, n, dests int) []string {
	base := seq.Add(int64(n)) - int64(n)
	ids := make([]string, n+1)
	for i := 1; i <= n; i++ {
		ids[i] = hookrelay.DeliveryID(fmt.Sprintf("evt_%d", base+int64(i)), destID(i%dests))
	}
	return ids
}

func (s *senderOnly) drain(ctx context.Context, n int) (measured, error) {
	ids := deliveryIDs(&s.seq, n, len(s.dests))
	return clientLoop(n, s.w, func(i int) error {
		dest := s.dests[i%len(s.dests)]
		d := hookrelay.Delivery{
			ID: ids[i], DestinationID: dest.ID,
			TenantID: dest.TenantID, Payload: s.payload,
		}
		res := s.sender.Send(ctx, hookrelay.SendParams{Delivery: d, Destination: dest, Now: time.Now()})
		if res.Kind != hookrelay.KindDelivered {
			return fmt.Errorf("send: %v %s %s", res.Kind, res.Reason, res.Detail)
		}
		return nil
	})
}

func (s *senderOnly) close() error {
	s.sender.CloseIdleConnections()
	return nil
}

// fasthttpClient is the "fasthttp" system.
type fasthttpClient struct {
	client  *fasthttp.Client
	urls    []string
	payload []byte
	w       int
	seq     atomic.Int64
}

func newFasthttpClient(url string, payload []byte, w, dests int) *fasthttpClient {
	c := &fasthttpClient{
		client:  &fasthttp.Client{MaxConnsPerHost: 4 * w, NoDefaultUserAgentHeader: true, DisablePathNormalizing: true},
		payload: payload, w: w,
	}
	for i := range dests {
		c.urls = append(c.urls, url+destPath(i))
	}
	return c
}

func (c *fasthttpClient) drain(_ context.Context, n int) (measured, error) {
	ids := deliveryIDs(&c.seq, n, len(c.urls))
	secrets := []string{benchSecret}
	return clientLoop(n, c.w, func(i int) error {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		dest := i % len(c.urls)
		id := ids[i]
		now := time.Now()
		sig, err := hookhttp.SignatureHeader(secrets, id, now, c.payload)
		if err != nil {
			return err
		}
		req.SetRequestURI(c.urls[dest])
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.SetContentType("application/json")
		req.Header.SetUserAgent(hookhttp.DefaultUserAgent)
		req.Header.Set(hookhttp.HeaderWebhookID, id)
		req.Header.Set(hookhttp.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(hookhttp.HeaderWebhookSignature, sig)
		req.Header.Set(hookhttp.HeaderIdempotencyKey, id)
		req.SetBodyRaw(c.payload)
		if err := c.client.DoTimeout(req, resp, 10*time.Second); err != nil {
			return err
		}
		if resp.StatusCode()/100 != 2 {
			return fmt.Errorf("receiver answered %d", resp.StatusCode())
		}
		return nil
	})
}

func (c *fasthttpClient) close() error {
	c.client.CloseIdleConnections()
	return nil
}
