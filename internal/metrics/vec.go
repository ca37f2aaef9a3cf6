package metrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// vec holds the series of one family, keyed by their label values.
type vec[T any] struct {
	name   string
	labels []string
	newT   func(values []string) *T

	mu     sync.RWMutex
	series map[string]*series[T]
}

type series[T any] struct {
	values []string
	m      *T
}

// newVec returns a family's series; newT makes the series of the given label
// values (the client's child for them) the first time they are used.
func newVec[T any](name string, labels []string, newT func(values []string) *T) *vec[T] {
	v := &vec[T]{
		name:   name,
		labels: slices.Clone(labels),
		newT:   newT,
		series: make(map[string]*series[T]),
	}
	if len(labels) == 0 {
		// The single series of an unlabelled family exists from the start.
		v.series[""] = &series[T]{m: newT(nil)}
	}
	return v
}

// with returns the series for values, creating it on first use. The common
// case, an existing series, takes only the read lock.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %q: got %d label values, want %d (%v)",
			v.name, len(values), len(v.labels), v.labels))
	}
	key, clean := seriesKey(values)
	v.mu.RLock()
	s := v.series[key]
	v.mu.RUnlock()
	if s != nil {
		return s.m
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	if s = v.series[key]; s == nil {
		// Copy: With's variadic slice may be the caller's own. The client keeps
		// the copy too, so With's own argument never escapes (no allocation per call).
		s = &series[T]{values: slices.Clone(clean)}
		s.m = v.newT(s.values)
		v.series[key] = s
	}
	return s.m
}

// seriesKey returns the map key for values and the values as they will be
// exported. Label values often come from requests, so invalid UTF-8 is
// replaced rather than panicking or producing an exposition Prometheus would
// reject. Valid UTF-8 never contains the byte 0xff, which makes it an
// unambiguous separator; a single value is its own key, with no allocation.
func seriesKey(values []string) (string, []string) {
	clean := values
	copied := false
	for i, s := range values {
		if !utf8.ValidString(s) {
			if !copied {
				// Never write to the caller's slice.
				clean, copied = slices.Clone(values), true
			}
			clean[i] = strings.ToValidUTF8(s, "\uFFFD")
		}
	}
	switch len(clean) {
	case 0:
		return "", nil
	case 1:
		return clean[0], clean
	}
	return strings.Join(clean, "\xff"), clean
}
