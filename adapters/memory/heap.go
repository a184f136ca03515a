package memory

import "container/heap"

// indexedHeap is a min-heap of elements ordered by less, built on
// container/heap. When setIndex is not nil it is told each element's
// position whenever the element moves, and -1 when it leaves the heap, so
// the owner can keep the position and later Fix or Remove the element by
// it; such elements are pointers, so the position lands in the element the
// owner holds. A heap that never fixes or removes leaves setIndex nil.
//
// The zero value is not usable; call newIndexedHeap.
type indexedHeap[E any] struct {
	s heapSlice[E]
}

func newIndexedHeap[E any](less func(a, b E) bool, setIndex func(e E, i int)) indexedHeap[E] {
	return indexedHeap[E]{heapSlice[E]{less: less, setIndex: setIndex}}
}

// Len returns the number of elements in the heap.
func (h *indexedHeap[E]) Len() int { return len(h.s.items) }

// Peek returns the least element without removing it. The heap must not be
// empty.
func (h *indexedHeap[E]) Peek() E { return h.s.items[0] }

// Push adds e.
func (h *indexedHeap[E]) Push(e E) { heap.Push(&h.s, e) }

// Pop removes and returns the least element. The heap must not be empty.
func (h *indexedHeap[E]) Pop() E { return heap.Pop(&h.s).(E) }

// Fix restores the order after the element at position i changed its key.
func (h *indexedHeap[E]) Fix(i int) { heap.Fix(&h.s, i) }

// Remove removes and returns the element at position i.
func (h *indexedHeap[E]) Remove(i int) E { return heap.Remove(&h.s, i).(E) }

// heapSlice implements heap.Interface for indexedHeap.
type heapSlice[E any] struct {
	items    []E
	less     func(a, b E) bool
	setIndex func(e E, i int)
}

func (h *heapSlice[E]) Len() int           { return len(h.items) }
func (h *heapSlice[E]) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }

func (h *heapSlice[E]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	if h.setIndex != nil {
		h.setIndex(h.items[i], i)
		h.setIndex(h.items[j], j)
	}
}

func (h *heapSlice[E]) Push(x any) {
	e := x.(E)
	if h.setIndex != nil {
		h.setIndex(e, len(h.items))
	}
	h.items = append(h.items, e)
}

func (h *heapSlice[E]) Pop() any {
	n := len(h.items) - 1
	e := h.items[n]
	var zero E
	h.items[n] = zero // let the element be collected
	h.items = h.items[:n]
	if h.setIndex != nil {
		h.setIndex(e, -1)
	}
	return e
}
