package events

import (
	"errors"
	"fmt"
)

// TypeUsageRecorded records a namespace's usage of its memories since the record
// before (memory.touch, the hits search served, evidence events), counted by the
// write side and published at its cadence as one record per namespace: no revision of
// any key; it takes its seq so the namespace's stream stays gapless, the projections
// pass over it, and the usage_fold pass folds it into the rows' counters.
const TypeUsageRecorded Type = "memory.usage_recorded"

// MaxUsageItems bounds the memories one usage record counts; a namespace with more
// publishes several records.
const MaxUsageItems = 1000

// Usage is what a memory.usage_recorded record carries: per memory, by id only, the
// uses counted since the namespace's usage record before. Ids and counts are plain;
// there is no content, no user and nothing sealed.
type Usage struct {
	Items []UsageItem `json:"items"`
}

// UsageItem is one memory's counted uses.
type UsageItem struct {
	MemoryID string `json:"memory_id"`
	Touches  int    `json:"touches,omitempty"`  // memory.touch calls: reinforcement_count
	Recalls  int    `json:"recalls,omitempty"`  // searches that served it: recall_count
	Evidence int    `json:"evidence,omitempty"` // restatements, merges, duplicates: evidence_count
}

func validateUsage(u *Usage) error {
	switch {
	case len(u.Items) == 0:
		return errors.New("no items")
	case len(u.Items) > MaxUsageItems:
		return fmt.Errorf("%d items, at most %d", len(u.Items), MaxUsageItems)
	}
	seen := make(map[string]bool, len(u.Items))
	for _, it := range u.Items {
		switch {
		case it.MemoryID == "":
			return errors.New("an item has no memory_id")
		case seen[it.MemoryID]:
			return fmt.Errorf("memory_id %s counted twice", it.MemoryID)
		case it.Touches < 0 || it.Recalls < 0 || it.Evidence < 0:
			return fmt.Errorf("item %s: negative count", it.MemoryID)
		case it.Touches == 0 && it.Recalls == 0 && it.Evidence == 0:
			return fmt.Errorf("item %s: counts nothing", it.MemoryID)
		}
		seen[it.MemoryID] = true
	}
	return nil
}
