package command

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// An import's items' tags are category links (memory.assign_category's), so memory.import
// goes through loom.category_links as the seed has it (memory-architecture,
// "memory.import"): it reads the links of its keys before the write, leaves out of
// each item's tags the pairs their owner rescinded, so a rescinded link stays rescinded
// when an import writes its key again, and records the pairs never stored in the
// commit. A rescind that lands between that read and the commit is written over, as a
// delete is.

// importLinks is what an import does with its items' categories.
type importLinks struct {
	tags  map[int][]string           // by item index: the tags its write carries
	added map[string][]string        // by heads.IdentityKey: the pairs never stored
	ids   map[string]memrow.Identity // by memory key: the identity each write writes
	// keptRescinded counts the pairs left out because their owner rescinded them.
	keptRescinded int
}

// importCategoryLinks reads the stored links of the writes' keys and sorts each
// item's tags into those its write carries and the pairs it adds.
func (s *Service) importCategoryLinks(ctx context.Context, base memrow.Identity, items []importItem, writes []importWrite) (*importLinks, error) {
	l := &importLinks{tags: map[int][]string{}, added: map[string][]string{}, ids: map[string]memrow.Identity{}}
	var ids []memrow.Identity
	for _, w := range writes {
		if len(items[w.index].Tags) > 0 {
			ids = append(ids, w.id)
		}
	}
	if len(ids) == 0 {
		return l, nil
	}
	stored, err := readCategoryLinks(ctx, s.pool, base, ids)
	if err != nil {
		return nil, err
	}
	for _, w := range writes {
		tags := items[w.index].Tags
		if len(tags) == 0 {
			continue
		}
		id := heads.IdentityKey(w.id)
		l.ids[w.id.MemoryKey] = w.id
		kept := []string{}
		for _, c := range tags {
			rescinded, ok := stored[categoryLink{id, c}]
			switch {
			case rescinded:
				l.keptRescinded++
				continue
			case !ok:
				l.added[id] = append(l.added[id], c)
			}
			kept = append(kept, c)
		}
		l.tags[w.index] = kept
	}
	return l, nil
}

// itemTags is the tags item i's write carries.
func (l *importLinks) itemTags(i int, it importItem) []string {
	if t, ok := l.tags[i]; ok {
		return t
	}
	return it.Tags
}

// record records, in the import's commit, the pairs never stored of the keys it wrote.
func (l *importLinks) record(actor string) func(ctx context.Context, tx pgx.Tx, written, merged []bulkResult) error {
	return func(ctx context.Context, tx pgx.Tx, written, _ []bulkResult) error {
		b := &pgx.Batch{}
		for _, r := range written {
			id, ok := l.ids[r.MemoryKey]
			if !ok {
				continue
			}
			cats := slices.Clone(l.added[heads.IdentityKey(id)])
			if len(cats) == 0 {
				continue
			}
			queueCategoryLinks(b, &memrow.Row{Identity: id, Seq: r.Seq}, cats, nil, actor)
		}
		if b.Len() == 0 {
			return nil
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("record the imported category links: %w", err)
		}
		return nil
	}
}

// counts are the import's category links as its batch audit row counts them: the
// pairs its written entries add, and those it left rescinded.
func (l *importLinks) counts(written []*entry) map[string]int {
	linked := 0
	for _, e := range written {
		if id, ok := l.ids[e.w.id.MemoryKey]; ok {
			linked += len(l.added[heads.IdentityKey(id)])
		}
	}
	return map[string]int{"categories_linked": linked, "categories_left_rescinded": l.keptRescinded}
}
