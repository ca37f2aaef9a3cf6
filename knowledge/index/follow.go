package index

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/knowledge/store"
)

// Keys is where the follower reads the records' data keys: a Postgres pool.
type Keys interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Follower feeds an Index from the change topic: it reads every partition from its
// start without a consumer group (each process keeps its own index), takes every
// record's seq as its namespace's position (from the ce_id header, so a memory
// record costs no decode), and applies the knowledge.document.* records, opened with
// their keys (one Postgres read a poll), and the namespaces' erasures. A record whose
// key is gone (erased) yields nothing, so a replay never brings an erased document
// back. Between fetches at the topic's end it rests while no search waits for a
// position (follow_rest.go).
type Follower struct {
	brokers []string
	topic   string
	keys    Keys
	index   *Index
	log     *slog.Logger
}

// NewFollower returns a follower of topic that feeds index.
func NewFollower(brokers []string, topic string, keys Keys, index *Index, log *slog.Logger) *Follower {
	return &Follower{brokers: brokers, topic: topic, keys: keys, index: index, log: log}
}

// Run follows the topic until ctx ends.
func (f *Follower) Run(ctx context.Context) error {
	cl, err := kafka.NewClient(f.brokers, kgo.ConsumeTopics(f.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollRecords(ctx, pollMax)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			f.log.Warn("knowledge index follower: fetch failed; retrying", "topic", topic, "partition", p, "err", err)
		})
		var recs []*kgo.Record
		fetches.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		for {
			ops, err := f.prepare(ctx, recs)
			if err == nil {
				f.index.apply(ops)
				break
			}
			f.log.Warn("knowledge index follower: reading the records' keys failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
		if len(recs) < pollMax && caughtUp(fetches) {
			f.index.rest(ctx, followRest)
		}
	}
}

// pollMax is the most records one poll takes.
const pollMax = 5000

// prepare turns a poll's records into the index's ops, in order.
func (f *Follower) prepare(ctx context.Context, recs []*kgo.Record) ([]op, error) {
	ops := make([]op, 0, len(recs))
	var docs []*events.Envelope
	for _, r := range recs {
		typ, id := header(r, "ce_type"), header(r, "ce_id")
		org, ns, seq, err := events.ParseRecordID(id)
		if err != nil {
			continue // not a record of Loom's: nothing to take
		}
		o := op{org: org, ns: ns, seq: seq, refGen: refGeneration(r)}
		if strings.HasPrefix(typ, "knowledge.") || typ == string(events.TypeErased) {
			env, err := events.Decode(r.Value)
			if err != nil {
				f.log.Error("knowledge index follower: skipping a record that is not a valid envelope", "record", id, "err", err)
			} else if env.Type.IsDocument() {
				o.env = env
				docs = append(docs, env)
			} else if env.Erasure != nil && env.Erasure.Scope == events.ErasureScopeNamespace {
				o.fence = true
			} else if env.Erasure != nil && env.Erasure.Scope == events.ErasureScopeUser && env.Erasure.UserRef != "" {
				// A user's erasure: the user's documents below the fence, found by the
				// reference their records carry (a version 1 record named the user by id,
				// and no document was written then).
				o.fence, o.userRef = true, env.Erasure.UserRef
				if o.live, err = store.LiveSources(ctx, f.keys, org, ns); err != nil {
					return nil, err
				}
			}
		}
		ops = append(ops, o)
	}
	if len(docs) == 0 {
		return ops, nil
	}
	keys, err := store.FetchKeys(ctx, f.keys, docs)
	if err != nil {
		return nil, err
	}
	for i := range ops {
		env := ops[i].env
		if env == nil {
			continue
		}
		key, ok := keys[env.ID]
		if !ok {
			continue // erased: its key is gone
		}
		c, err := events.OpenDocument(key, env.ID, env.Sealed)
		if err != nil {
			f.log.Error("knowledge index follower: a document's key does not open it; it is not indexed", "record", env.ID, "err", fmt.Sprint(err))
			continue
		}
		ops[i].content = c
	}
	return ops, nil
}

// refGeneration is the generation of the org's user reference key a record's
// references are under (ce_loomrefgen); a record without one was written before
// generations, under the first.
func refGeneration(r *kgo.Record) int {
	if gen, err := strconv.Atoi(header(r, events.HeaderRefGeneration)); err == nil {
		return gen
	}
	return 1
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
