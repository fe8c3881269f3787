package httpapi

import "sync"

// bounded is a map kept under a bound on entries and one on their total
// size: put evicts other entries (in map order: arbitrary) until the new
// one fits. The REST caches of this package (peer lists, list answers,
// reach counts, events) keep their entries in one each and decide
// themselves whether an entry they get is still current.
type bounded[K comparable, V any] struct {
	mu         sync.Mutex
	m          map[K]V
	used       int
	maxEntries int
	maxSize    int
	size       func(V) int
}

func newBounded[K comparable, V any](maxEntries, maxSize int, size func(V) int) *bounded[K, V] {
	return &bounded[K, V]{m: map[K]V{}, maxEntries: maxEntries, maxSize: maxSize, size: size}
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

// put keeps v under k. A v larger than the size bound alone is not kept
// (k's entry stays as it was). keepOld, when not nil, is asked about k's
// current entry and may keep it instead of v.
func (b *bounded[K, V]) put(k K, v V, keepOld func(old V) bool) {
	n := b.size(v)
	if n > b.maxSize {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.m[k]; ok {
		if keepOld != nil && keepOld(old) {
			return
		}
		b.used -= b.size(old)
		delete(b.m, k)
	}
	for id, old := range b.m {
		if len(b.m) < b.maxEntries && b.used+n <= b.maxSize {
			break
		}
		b.used -= b.size(old)
		delete(b.m, id)
	}
	b.m[k] = v
	b.used += n
}

// remove forgets k's entry.
func (b *bounded[K, V]) remove(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.m[k]; ok {
		b.used -= b.size(old)
		delete(b.m, k)
	}
}
