package command

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.assign_category links a memory to categories, or rescinds links: a category
// is one of the row's tags (the namespace's taxonomy, which the extractor tags facts
// from and mem0's API shows as categories), so a link is a revision like any other,
// committed over the head the op read (a copy writer: sealed, on the topic, erasable,
// replayable). loom.category_links records each pair linked or rescinded in the same
// transaction, so an import adds only pairs never stored and a rescind stays rescinded.
// Linking what is linked, or rescinding what is not, writes nothing.

// assignCategoryBody is the body of :assign_category.
type assignCategoryBody struct {
	copyBody
	Categories []string `json:"categories"`
	Rescind    []string `json:"rescind"`
}

// checkCategories refuses a request that links nothing and rescinds nothing, names a
// category that is no valid tag, or both links and rescinds one category.
func checkCategories(b *assignCategoryBody) error {
	if len(b.Categories) == 0 && len(b.Rescind) == 0 {
		return httperr.Validation("categories", "categories or rescind is required: the categories to link or to rescind")
	}
	for field, list := range map[string][]string{"categories": b.Categories, "rescind": b.Rescind} {
		if err := memrow.ValidateTags(list); err != nil {
			return httperr.Validation(field, err.Error())
		}
	}
	for _, c := range b.Categories {
		if slices.Contains(b.Rescind, c) {
			return httperr.Validation("rescind", fmt.Sprintf("category %q is both linked and rescinded", c))
		}
	}
	return nil
}

// assignCategoryOp is the copy writer of one request: the head's tags plus the linked
// categories, less the rescinded ones, in the order first linked.
func assignCategoryOp(b assignCategoryBody, held *[]string) copyOp {
	return copyOp{op: opAssignCategory, event: events.TypeRevised, change: func(_ context.Context, _ *Service, c *copyWrite) error {
		tags := slices.Clone(c.head.Tags)
		var linked, rescinded []string
		for _, cat := range b.Categories {
			if !slices.Contains(tags, cat) {
				tags = append(tags, cat)
				linked = append(linked, cat)
			}
		}
		tags = slices.DeleteFunc(tags, func(t string) bool {
			if slices.Contains(b.Rescind, t) {
				rescinded = append(rescinded, t)
				return true
			}
			return false
		})
		if len(tags) > memrow.MaxTags {
			return httperr.Validation("categories", fmt.Sprintf("the memory would have %d tags, more than %d", len(tags), memrow.MaxTags))
		}
		c.row.Tags, *held = tags, tags
		c.extra["categories"], c.extra["linked"], c.extra["rescinded"] = nonNil(tags), nonNil(linked), nonNil(rescinded)
		row, actor := c.row, c.p.Actor()
		c.inTx = func(ctx context.Context, tx pgx.Tx) error {
			return recordCategoryLinks(ctx, tx, row, linked, rescinded, actor)
		}
		return nil
	}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

const opAssignCategory = "memory.assign_category"

// assignCategory is memory.assign_category: a copy writer of the key's head.
func (s *Service) assignCategory(ctx context.Context, p auth.Principal, r copyCall, body assignCategoryBody) (copyAnswer, error) {
	var held []string // the memory's categories once the op has run
	r.op = assignCategoryOp(body, &held)
	ans, err := s.runCopy(ctx, p, r)
	if err != nil || ans["written"] == true {
		return ans, err
	}
	// Nothing changed: the answer still says which categories the memory holds.
	ans["categories"], ans["linked"], ans["rescinded"] = nonNil(held), []string{}, []string{}
	return ans, nil
}
