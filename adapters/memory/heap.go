package memory

// indexedHeap is a min-heap of elements ordered by less. When setIndex is
// not nil it is told each element's position whenever the element moves,
// and -1 when it leaves the heap, so the owner can keep the position and
// later Fix, Replace or Remove the element by it; such elements are (or
// hold) pointers, so the position lands in the element the owner holds. A heap that never
// fixes or removes leaves setIndex nil.
//
// Written out rather than built on container/heap, which takes and returns
// every pushed and popped element as an interface value (an allocation for
// each lease entry) and calls Less and Swap through an interface.
// BenchmarkWorkerManyDestinations/destinations=10 (50,000 queued, four
// alternated runs): 4,928–5,423 → 4,735–4,954 ns and 2,336–2,353 → 2,301–2,303
// bytes per delivery.
//
// The zero value is not usable; call newIndexedHeap.
type indexedHeap[E any] struct {
	items    []E
	less     func(a, b E) bool
	setIndex func(e E, i int)
}

func newIndexedHeap[E any](less func(a, b E) bool, setIndex func(e E, i int)) indexedHeap[E] {
	return indexedHeap[E]{less: less, setIndex: setIndex}
}

// Len returns the number of elements in the heap.
func (h *indexedHeap[E]) Len() int { return len(h.items) }

// Peek returns the least element without removing it. The heap must not be
// empty.
func (h *indexedHeap[E]) Peek() E { return h.items[0] }

// Push adds e.
func (h *indexedHeap[E]) Push(e E) {
	h.items = append(h.items, e)
	h.place(len(h.items) - 1)
	h.up(len(h.items) - 1)
}

// Pop removes and returns the least element. The heap must not be empty.
func (h *indexedHeap[E]) Pop() E { return h.Remove(0) }

// Replace puts e at position i, in place of the element there, and restores
// the order.
func (h *indexedHeap[E]) Replace(i int, e E) {
	h.items[i] = e
	h.place(i)
	h.Fix(i)
}

// Fix restores the order after the element at position i changed its key.
func (h *indexedHeap[E]) Fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// Remove removes and returns the element at position i.
func (h *indexedHeap[E]) Remove(i int) E {
	e := h.items[i]
	n := len(h.items) - 1
	if i != n {
		h.items[i] = h.items[n]
		h.place(i)
	}
	var zero E
	h.items[n] = zero // let the element be collected
	h.items = h.items[:n]
	if i != n && !h.down(i) {
		h.up(i)
	}
	if h.setIndex != nil {
		h.setIndex(e, -1)
	}
	return e
}

// place tells the element at position i where it is.
func (h *indexedHeap[E]) place(i int) {
	if h.setIndex != nil {
		h.setIndex(h.items[i], i)
	}
}

// swap exchanges the elements at positions i and j.
func (h *indexedHeap[E]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.place(i)
	h.place(j)
}

// up moves the element at position i towards the root while it is less
// than its parent.
func (h *indexedHeap[E]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down moves the element at position i away from the root while a child
// is less than it, and reports whether it moved.
func (h *indexedHeap[E]) down(i int) bool {
	start, n := i, len(h.items)
	for {
		least := 2*i + 1
		if least >= n || least < 0 { // least < 0: int overflow
			break
		}
		if right := least + 1; right < n && h.less(h.items[right], h.items[least]) {
			least = right
		}
		if !h.less(h.items[least], h.items[i]) {
			break
		}
		h.swap(i, least)
		i = least
	}
	return i > start
}
