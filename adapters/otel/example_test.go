package hookotel_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/hookrelay/hookrelay"
	hookotel "github.com/hookrelay/hookrelay/adapters/otel"
)

func ExampleWrapSender() {
	tp := sdktrace.NewTracerProvider() // with your exporter
	defer func() { _ = tp.Shutdown(context.Background()) }()

	// Stands in for the HTTP sender, whose OnRequest hook is where
	// InjectTraceContext goes.
	httpSender := hookrelay.SenderFunc(func(ctx context.Context, p hookrelay.SendParams) hookrelay.Result {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://acme.example/hooks", nil)
		if err != nil {
			return hookrelay.Permanent(hookrelay.ReasonSenderError)
		}
		hookotel.InjectTraceContext(ctx, req)
		fmt.Println("traceparent set:", req.Header.Get("traceparent") != "")
		return hookrelay.Delivered(200)
	})
	sender := hookotel.WrapSender(httpSender, hookotel.WithTracerProvider(tp))

	res := sender.Send(context.Background(), hookrelay.SendParams{
		Delivery: hookrelay.Delivery{ID: "whd_0f8c", DestinationID: "acme", Attempt: 1},
	})
	fmt.Println(res.Kind)
	// Output:
	// traceparent set: true
	// delivered
}

func ExampleNewMetrics() {
	// With no MeterProvider the global one is used; Stats feeds the gauges.
	metrics, err := hookotel.NewMetrics(hookotel.MetricsConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer metrics.Close()
	_ = hookrelay.Config{Observer: metrics} // plus Queue, Ledger, Destinations, Sender
}
