package hooknats

import "github.com/nats-io/nats.go/jetstream"

// WrapConsumer replaces the consumer the queue fetches from with
// wrap(consumer), until the queue creates its topology again: tests use
// it for answers the test server (NATS 2.9) does not give.
func (q *Queue) WrapConsumer(wrap func(jetstream.Consumer) jetstream.Consumer) {
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	q.b.cons = wrap(q.b.cons)
}
