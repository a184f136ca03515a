package hookslog_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/hookrelay/hookrelay"
	hookslog "github.com/hookrelay/hookrelay/adapters/slog"
)

func Example() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, nil)) // Info and above
	obs := hookslog.New(hookslog.Config{Logger: logger})
	// Pass obs as hookrelay.Config.Observer; here one event is observed by hand.

	res := hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401)
	obs.Observe(context.Background(), hookrelay.Event{
		Name: hookrelay.EventDeadLettered,
		Delivery: hookrelay.Delivery{
			ID: "whd_0f8c", EventID: "evt-1", TenantID: "tenant-1",
			DestinationID: "acme", EventType: "lease.payment_recorded", Attempt: 1,
		},
		Result: &res, Reason: res.Reason,
		Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	})
	// Output:
	// time=2026-03-01T12:00:00.000Z level=WARN msg="delivery dead-lettered" event=dead_lettered delivery_id=whd_0f8c event_id=evt-1 tenant_id=tenant-1 destination_id=acme event_type=lease.payment_recorded attempt=1 outcome=rejected result=permanent status=401 reason=auth_rejected
}
