package hookhttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hookrelay/hookrelay"
)

func TestClassifyErrorByType(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://h/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	read := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://h/", Err: &net.OpError{Op: "read", Net: "tcp", Err: err}}
	}
	tests := []struct {
		name    string
		err     error
		written bool
		want    hookrelay.Result
	}{
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), false, hookrelay.Retryable(hookrelay.ReasonConnectionRefused)},
		{"dns", dial(&net.DNSError{Err: "no such host", Name: "h", IsNotFound: true}), false, hookrelay.Retryable(hookrelay.ReasonDNSFailure)},
		{"dial timeout", dial(os.ErrDeadlineExceeded), false, hookrelay.Retryable(hookrelay.ReasonTimeout)},
		{"context deadline before write", fmt.Errorf("wrapped: %w", context.DeadlineExceeded), false, hookrelay.Retryable(hookrelay.ReasonTimeout)},
		{"reset while writing", read(os.NewSyscallError("write", syscall.ECONNRESET)), false, hookrelay.Retryable(hookrelay.ReasonConnectionReset)},
		{"other before write", errors.New("tls: handshake failure"), false, hookrelay.Retryable(hookrelay.ReasonNetworkError)},
		{"blocked", dial(&blockedError{addr: "10.0.0.1:80"}), false, hookrelay.Permanent(ReasonDestinationBlocked)},
		{"timeout after write", &url.Error{Op: "Post", URL: "http://h/", Err: context.DeadlineExceeded}, true, hookrelay.Unknown(hookrelay.ReasonTimeout)},
		{"read deadline after write", read(os.ErrDeadlineExceeded), true, hookrelay.Unknown(hookrelay.ReasonTimeout)},
		{"reset after write", read(os.NewSyscallError("read", syscall.ECONNRESET)), true, hookrelay.Unknown(hookrelay.ReasonConnectionReset)},
		{"EOF after write", &url.Error{Op: "Post", URL: "http://h/", Err: io.EOF}, true, hookrelay.Unknown(hookrelay.ReasonConnectionReset)},
		{"broken pipe after write", read(syscall.EPIPE), true, hookrelay.Unknown(hookrelay.ReasonConnectionReset)},
		{"other after write", errors.New("http2: stream error"), true, hookrelay.Unknown(hookrelay.ReasonNetworkError)},
		// A message that only looks like a refusal is not classified as one.
		{"string lookalike", errors.New("connect: connection refused"), false, hookrelay.Retryable(hookrelay.ReasonNetworkError)},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, classifyError(tt.err, tt.written), tt.name)
	}
}

func TestSendOverTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	trusting := newTestSender(t, Config{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	res := trusting.Send(context.Background(), sendParams(srv.URL, "{}"))
	assert.Equal(t, hookrelay.KindDelivered, res.Kind)

	untrusting := newTestSender(t, Config{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}})
	res = untrusting.Send(context.Background(), sendParams(srv.URL, "{}"))
	assert.Equal(t, hookrelay.KindRetryable, res.Kind, "an unknown certificate is retryable: it may be fixed")
	assert.Equal(t, hookrelay.OutcomeRejected, res.Outcome, "nothing was sent")
}
