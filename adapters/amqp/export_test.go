package hookamqp

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
