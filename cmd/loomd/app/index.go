package app

import (
	"context"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/indexfeed"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/searchindex"
)

// searchIndex is a process's in-process search index and the follower that feeds it
// from the topic: one per process that runs the command or the query role, shared by
// both when it runs the two.
type searchIndex struct {
	index *searchindex.Index
	feed  *indexfeed.Follower
}

// openIndex builds the process's index when its roles read one and LOOM_SEARCH_INDEX is
// memory; nil otherwise (every read then goes to ClickHouse).
func (p *Process) openIndex() *searchIndex {
	c := p.Cfg
	if c.SearchIndex.Mode != config.SearchIndexMemory || !(c.Roles.Has(config.RoleCommand) || c.Roles.Has(config.RoleQuery)) {
		return nil
	}
	x := searchindex.New(searchindex.Config{GraphMin: c.SearchIndex.GraphMin})
	if c.Roles.Has(config.RoleRelay) {
		// The relay of this process hands the keys it seals records with to the follower:
		// a record it publishes is applied without reading its key back from Postgres.
		p.keyHandoff = revisions.NewHandoff()
	}
	feed := indexfeed.New(indexfeed.Config{Brokers: c.Kafka.Brokers, Topic: c.Pipeline.Topic, BatchRecords: c.SearchIndex.BatchRecords,
		FetchMaxWait: c.SearchIndex.FetchMaxWait, MaxBytes: c.SearchIndex.MaxBytes, CheckpointDir: c.SearchIndex.CheckpointDir,
		CheckpointInterval: c.SearchIndex.CheckpointInterval, KEKs: p.Keys.IDs(), Tracer: p.tracer(), Handoff: p.keyHandoff}, p.PG, x, p.Log)
	indexfeed.RegisterGauges(p.Metrics, feed, x)
	return &searchIndex{index: x, feed: feed}
}

// Index is the process's search index, nil when it holds none.
func (p *Process) Index() *searchindex.Index {
	if p.index == nil {
		return nil
	}
	return p.index.index
}

// IndexHealth is what the process's index follower has done, false when it holds none.
func (p *Process) IndexHealth() (indexfeed.Health, bool) {
	if p.index == nil {
		return indexfeed.Health{}, false
	}
	return indexfeed.HealthOf(p.index.feed, p.index.index), true
}

// runIndex replays the topic into the index, then follows it, until ctx ends.
func (p *Process) runIndex(ctx context.Context) error {
	return p.index.feed.Run(ctx)
}
