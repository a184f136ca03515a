package hookamqp

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Generation counts the connections this queue has made: 1 until the first
// reconnect.
func (q *Queue) Generation() uint64 {
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	return q.b.gen
}

// DropConnection closes the connection under the queue, as a network
// failure would; the queue reconnects.
func (q *Queue) DropConnection() {
	q.b.mu.Lock()
	conn := q.b.conn
	q.b.mu.Unlock()
	_ = conn.Close()
}

// LocalAddr is the client side of the queue's connection, as RabbitMQ
// names the connection ("127.0.0.1:54321 -> 127.0.0.1:5672").
func (q *Queue) LocalAddr() string {
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	return q.b.conn.LocalAddr().String()
}

// HoldReconnects keeps the queue from answering a lost connection or a
// cancelled consumer (it neither stops publishing on the old channel nor
// reconnects) until release is called.
func (q *Queue) HoldReconnects() (release func()) {
	hold := make(chan struct{})
	q.b.mu.Lock()
	q.b.hold = hold
	q.b.mu.Unlock()
	return func() {
		q.b.mu.Lock()
		q.b.hold = nil
		q.b.mu.Unlock()
		close(hold)
	}
}

// PublishAtOnce publishes one message with message ID id to each of
// queues on the same channel, waits for every confirm, then takes each
// one's return in the order given: a Redeliver and a Publish of the same
// delivery interleaved so. The errors are in the order of queues.
func (q *Queue) PublishAtOnce(ctx context.Context, id string, queues ...string) []error {
	ss := make([]sent, len(queues))
	errs := make([]error, len(queues))
	for i, name := range queues {
		ss[i], errs[i] = q.b.send(ctx, name, amqp.Publishing{MessageId: id, Body: []byte(`{}`)})
		if errs[i] != nil {
			return errs
		}
	}
	for i, name := range queues {
		errs[i] = confirm(ctx, name, ss[i])
	}
	ss[0].pub.sync()
	for i, name := range queues {
		if errs[i] == nil {
			errs[i] = ss[i].pub.take(name, ss[i].id)
		}
	}
	return errs
}
