package query

import (
	"context"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/store"
)

// Inspection is knowledge.inspect's answer: a namespace's documents by format, their
// chunks, and the work still owed to them (open ingestion jobs, and the records the
// namespace committed that this process's chunk index has not applied yet).
type Inspection struct {
	Documents  int64               `json:"documents"`
	Deleted    int64               `json:"deleted"`
	Bytes      int64               `json:"bytes"`
	Chunks     int64               `json:"chunks"`
	ByFormat   []store.FormatCount `json:"by_format"`
	Ingestions store.OpenJobs      `json:"ingestions"`
	Index      IndexPosition       `json:"index"`
}

// IndexPosition is how far this process's chunk index has applied a namespace's
// records: Generation is the namespace's last committed revision, Position the last
// the index applied; Behind is the difference, never below zero.
type IndexPosition struct {
	Generation int64 `json:"generation"`
	Position   int64 `json:"position"`
	Behind     int64 `json:"behind"`
}

// inspect is knowledge.inspect, read from the heads and the jobs in Postgres (503
// POSTGRES_UNAVAILABLE when it cannot be reached).
func (s *Service) inspect(ctx context.Context, p auth.Principal, ns string) (*Inspection, error) {
	// The jobs first: a job that ended before they were read has written its
	// documents before the heads are counted.
	// A token bound to a user counts the namespace's documents and jobs and its user's.
	users := readUsers(p, "")
	jobs, err := store.CountOpenJobs(ctx, s.pool, p.Org, ns, users)
	if err != nil {
		return nil, httperr.Store("counting the ingestion jobs", err)
	}
	formats, err := store.CountByFormat(ctx, s.pool, p.Org, ns, users)
	if err != nil {
		return nil, httperr.Store("counting the documents", err)
	}
	gen, err := generations.Read(ctx, s.pool, p.Org, ns)
	if err != nil {
		return nil, httperr.Store("reading the namespace's generation", err)
	}
	in := &Inspection{ByFormat: formats, Ingestions: jobs,
		Index: IndexPosition{Generation: gen, Position: s.index.Position(p.Org, ns)}}
	in.Index.Behind = max(0, gen-in.Index.Position)
	for _, f := range formats {
		in.Documents += f.Live
		in.Deleted += f.Deleted
		in.Bytes += f.Bytes
		in.Chunks += f.Chunks
	}
	return in, nil
}
