package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/hookrelay/hookrelay"
	hookhttp "github.com/hookrelay/hookrelay/adapters/http"
)

// idleCloser is a sender that keeps connections.
type idleCloser interface {
	hookrelay.Sender
	CloseIdleConnections()
}

// plainSender posts the payload as the ceiling loop does, with no signing,
// headers or classification beyond 2xx: with --sender plain the difference
// to the ceiling is the engine and the store alone.
type plainSender struct {
	client *http.Client
	tr     *http.Transport
}

func newPlainSender(w int) *plainSender {
	tr := &http.Transport{MaxIdleConns: w, MaxIdleConnsPerHost: w, IdleConnTimeout: time.Minute}
	return &plainSender{client: &http.Client{Transport: tr}, tr: tr}
}

func (s *plainSender) CloseIdleConnections() { s.tr.CloseIdleConnections() }

func (s *plainSender) Send(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Destination.URL, bytes.NewReader(p.Delivery.Payload))
	if err != nil {
		return hookrelay.Permanent(hookhttp.ReasonInvalidURL)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return hookrelay.Unknown(hookrelay.ReasonNetworkError)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return hookrelay.Retryable(hookrelay.ReasonUnexpectedStatus).WithStatus(resp.StatusCode)
	}
	return hookrelay.Delivered(resp.StatusCode)
}
