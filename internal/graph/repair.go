package graph

import (
	"sort"
	"time"
)

// orderKey places an observation among the values of its relation: its start day,
// then when it was seen, then its object. It is a total order read from stored
// columns, so a write, an Undo and a replay all close the same values.
type orderKey struct {
	day    int64
	seenUS int64
	object string
}

func keyOf(o *Observation) orderKey {
	return orderKey{day: dayOf(o.ValidFrom), seenUS: o.SeenUS, object: o.Object}
}

// dayOf is the UTC day a time falls on, counted from the Unix epoch.
func dayOf(t time.Time) int64 {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return d
}

func (k orderKey) after(o orderKey) bool {
	if k.day != o.day {
		return k.day > o.day
	}
	if k.seenUS != o.seenUS {
		return k.seenUS > o.seenUS
	}
	return k.object > o.object
}

// Repair keeps one value current among the active observations of one subject's
// single-valued relation. A value is as new as its newest observation; the newest
// value is never closed. Every open-ended observation of an older value closes when
// the earliest observation of a newer value that beats it starts (never before it
// started itself). An observation stated with its own end is left to that end, so it
// stays current beside a newer value. It returns the end of each observation to close.
func Repair(obs []*Observation) map[ObsKey]time.Time {
	newest := map[string]orderKey{}
	for _, o := range obs {
		if k, ok := newest[o.Object]; !ok || keyOf(o).after(k) {
			newest[o.Object] = keyOf(o)
		}
	}
	sorted := append([]*Observation(nil), obs...)
	sort.Slice(sorted, func(i, j int) bool { return keyOf(sorted[j]).after(keyOf(sorted[i])) })
	closes := map[ObsKey]time.Time{}
	for _, o := range sorted {
		if o.StatedTo != nil || !o.Active() {
			continue
		}
		own, ko := newest[o.Object], keyOf(o)
		var end *time.Time
		for _, p := range sorted {
			if p.Object == o.Object || !newest[p.Object].after(own) || !keyOf(p).after(ko) {
				continue
			}
			if end == nil || p.ValidFrom.Before(*end) {
				t := p.ValidFrom
				end = &t
			}
		}
		if end == nil {
			continue
		}
		if end.Before(o.ValidFrom) {
			*end = o.ValidFrom
		}
		closes[o.ObsKey] = *end
	}
	return closes
}
