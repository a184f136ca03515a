package memory

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type heapItem struct {
	key   int
	name  string
	index int
}

func newItemHeap() indexedHeap[*heapItem] {
	return newIndexedHeap(
		func(a, b *heapItem) bool { return a.key < b.key },
		func(e *heapItem, i int) { e.index = i },
	)
}

// checkIndexes asserts that every element in h knows its position.
func checkIndexes(t *testing.T, h *indexedHeap[*heapItem]) {
	t.Helper()
	for i, e := range h.items {
		require.Equal(t, i, e.index, "element %q", e.name)
	}
}

// popAll pops h empty and returns the keys in pop order, checking that each
// popped element is told it left.
func popAll(t *testing.T, h *indexedHeap[*heapItem]) []int {
	t.Helper()
	var keys []int
	for h.Len() > 0 {
		require.Equal(t, h.Peek(), h.items[0])
		e := h.Pop()
		require.Equal(t, -1, e.index, "popped %q", e.name)
		checkIndexes(t, h)
		keys = append(keys, e.key)
	}
	return keys
}

func TestIndexedHeapPopsInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newItemHeap()
	var want []int
	for i := range 200 {
		k := rng.IntN(50) // repeats included
		want = append(want, k)
		h.Push(&heapItem{key: k, name: string(rune('a' + i%26))})
		checkIndexes(t, &h)
	}
	slices.Sort(want)
	assert.Equal(t, len(want), h.Len())
	assert.Equal(t, want, popAll(t, &h))
}

func TestIndexedHeapFixAfterKeyChange(t *testing.T) {
	h := newItemHeap()
	items := map[string]*heapItem{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		items[name] = &heapItem{key: (i + 1) * 10, name: name}
		h.Push(items[name])
	}
	require.Equal(t, "a", h.Peek().name)

	// Move the last one to the front, the first one to the back, and one in
	// the middle a little, each through the position it was told.
	items["g"].key = 1
	h.Fix(items["g"].index)
	checkIndexes(t, &h)
	require.Equal(t, "g", h.Peek().name)

	items["a"].key = 100
	h.Fix(items["a"].index)
	checkIndexes(t, &h)

	items["d"].key = 25
	h.Fix(items["d"].index)
	checkIndexes(t, &h)

	var names []string
	for h.Len() > 0 {
		names = append(names, h.Pop().name)
	}
	assert.Equal(t, []string{"g", "b", "d", "c", "e", "f", "a"}, names)
}

// Replace puts a new element (here with a new key) where the old one was
// and moves it to its place, telling both where they are.
func TestIndexedHeapReplace(t *testing.T) {
	h := newItemHeap()
	items := map[string]*heapItem{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		items[name] = &heapItem{key: (i + 1) * 10, name: name}
		h.Push(items[name])
	}
	g2 := &heapItem{key: 1, name: "g2"}
	h.Replace(items["g"].index, g2)
	checkIndexes(t, &h)
	require.Equal(t, "g2", h.Peek().name)

	a2 := &heapItem{key: 100, name: "a2"}
	h.Replace(items["a"].index, a2)
	checkIndexes(t, &h)

	d2 := &heapItem{key: 25, name: "d2"}
	h.Replace(items["d"].index, d2)
	checkIndexes(t, &h)

	var names []string
	for h.Len() > 0 {
		names = append(names, h.Pop().name)
	}
	assert.Equal(t, []string{"g2", "b", "d2", "c", "e", "f", "a2"}, names)
}

func TestIndexedHeapRemoveByIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	h := newItemHeap()
	var all []*heapItem
	for i := range 100 {
		e := &heapItem{key: rng.IntN(1000), name: string(rune('A' + i%26))}
		all = append(all, e)
		h.Push(e)
	}
	// Remove every third element, wherever it now sits.
	var kept []int
	for i, e := range all {
		if i%3 != 0 {
			kept = append(kept, e.key)
			continue
		}
		got := h.Remove(e.index)
		require.Same(t, e, got)
		require.Equal(t, -1, e.index)
		checkIndexes(t, &h)
	}
	slices.Sort(kept)
	assert.Equal(t, kept, popAll(t, &h))
}

// A heap without setIndex (the store's lease heap) orders values alone.
func TestIndexedHeapWithoutIndexes(t *testing.T) {
	h := newIndexedHeap(func(a, b int) bool { return a < b }, nil)
	for _, k := range []int{5, 3, 8, 1, 9, 2} {
		h.Push(k)
	}
	h.items[0] = 7 // a key change at the head, then Fix
	h.Fix(0)
	var got []int
	for h.Len() > 0 {
		got = append(got, h.Pop())
	}
	assert.Equal(t, []int{2, 3, 5, 7, 8, 9}, got)

	h.Push(4)
	h.Push(2)
	assert.Equal(t, 2, h.Remove(0))
	assert.Equal(t, 4, h.Pop())
	assert.Zero(t, h.Len())
}
