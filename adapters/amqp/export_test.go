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
