// Package revisions is how a follower of the revisions topic reads it: each record
// decoded and classified (a revision, an erasure with its fence, a redaction, or a
// placeholder that only takes its seq), and the sealed content of a batch's revisions
// opened with their data keys, read in one Postgres query. The projector and the
// in-process search index's follower both read the topic through it, so they agree on
// every record.
package revisions

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/erasure"
)

// Kind says what a record asks of a follower.
type Kind int

const (
	// Placeholder records (a parked record's placeholder) only take their seq.
	Placeholder Kind = iota
	// Revision records carry a memory revision to project.
	Revision
	// Erasure records fence their scope below their seq; their seq is a jump: it moves
	// a position over the seqs the erasure withdrew before they were published.
	Erasure
	// Redaction records scrub the text of the versions they name.
	Redaction
)

// Record is one record of the topic, decoded.
type Record struct {
	Env  *events.Envelope
	Kind Kind
	// Fence is an erasure's, when it carries one (a record older than the field does not).
	Fence    *erasure.Fence
	Redacted *erasure.Redaction
	// Where the record is on the topic.
	Topic     string
	Partition int32
	Offset    int64
}

// Decode decodes records in their order, on every core: decoding the JSON is most of
// what a replay costs. A record that is not an envelope cannot be projected now or on
// any replay, and holding its partition behind it would stop every namespace on it: it
// is handed to undecodable and left out.
func Decode(recs []*kgo.Record, undecodable func(*kgo.Record, error)) []Record {
	envs := make([]*events.Envelope, len(recs))
	errs := make([]error, len(recs))
	parallel(len(recs), func(i int) { envs[i], errs[i] = events.Decode(recs[i].Value) })
	out := make([]Record, 0, len(recs))
	for i, r := range recs {
		env, err := envs[i], errs[i]
		if err != nil {
			undecodable(r, err)
			continue
		}
		d := Record{Env: env, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		switch {
		case env.Type == events.TypeErased:
			d.Kind = Erasure
			if f, ok := erasure.FenceOf(env); ok {
				d.Fence = &f
			}
		case env.Type == events.TypeRedacted:
			d.Kind = Redaction
			if x, ok := erasure.RedactionOf(env); ok {
				d.Redacted = &x
			}
		case env.Type.IsRevision():
			d.Kind = Revision
		}
		out = append(out, d)
	}
	return out
}

// Querier is a pool or a connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// FetchKeys reads the data keys of revisions in one query, by record id, unwrapped by
// the session's KEKs (loom.unwrapped_key). A revision whose key is missing was
// redacted or erased.
func FetchKeys(ctx context.Context, q Querier, revs []*events.Envelope) (map[string][]byte, error) {
	orgs := make([]string, len(revs))
	nss := make([]string, len(revs))
	seqs := make([]int64, len(revs))
	for i, e := range revs {
		orgs[i], nss[i], seqs[i] = e.Org, e.Namespace, e.Seq
	}
	rows, err := q.Query(ctx, `SELECT k.org, k.namespace, k.seq, loom.unwrapped_key(k.data_key)
		FROM loom.revision_keys k
		JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS b(org, namespace, seq)
		  ON k.org = b.org AND k.namespace = b.namespace AND k.seq = b.seq`, orgs, nss, seqs)
	if err != nil {
		return nil, fmt.Errorf("read revision keys: %w", err)
	}
	defer rows.Close()
	keys := make(map[string][]byte, len(revs))
	for rows.Next() {
		var org, ns string
		var seq int64
		var key []byte
		if err := rows.Scan(&org, &ns, &seq, &key); err != nil {
			return nil, fmt.Errorf("read revision keys: %w", err)
		}
		keys[events.RecordID(org, ns, seq)] = key
	}
	return keys, rows.Err()
}

// Opened is a revision with its content opened.
type Opened struct {
	Env     *events.Envelope
	Content *events.Content
}

// Unopened is a revision whose data key, which exists, does not open its content: a
// damaged record, not a redaction.
type Unopened struct {
	Env *events.Envelope
	Err error
}

// Open opens each revision's content with its key, and fills in the user id and the
// content digest a version 2 revision carries sealed (events.Opened). A revision whose key is gone
// (keyless: redacted or erased) yields nothing of its content, so a replay never brings
// it back; one whose key does not open it is returned apart.
func Open(revs []*events.Envelope, keys map[string][]byte) (opened []Opened, bad []Unopened, keyless []*events.Envelope) {
	return open(revs, keys, events.Open)
}

// OpenInPlace is Open decrypting each content over its envelope's ciphertext
// (events.OpenInPlace): the envelopes' sealed content is spent, and opens no second
// time. For the followers of the topic (the projector, the index), which decode their
// records afresh for every attempt at a batch and open each once.
func OpenInPlace(revs []*events.Envelope, keys map[string][]byte) (opened []Opened, bad []Unopened, keyless []*events.Envelope) {
	return open(revs, keys, events.OpenInPlace)
}

// OpenSearchableInPlace is OpenInPlace for a search index, which reads no key
// embedding (events.OpenSearchableInPlace): each content's KeyEmbedding is checked but
// left nil.
func OpenSearchableInPlace(revs []*events.Envelope, keys map[string][]byte) (opened []Opened, bad []Unopened, keyless []*events.Envelope) {
	return open(revs, keys, events.OpenSearchableInPlace)
}

func open(revs []*events.Envelope, keys map[string][]byte, openOne func([]byte, string, *events.Sealed) (*events.Content, error)) (
	opened []Opened, bad []Unopened, keyless []*events.Envelope) {
	contents := make([]*events.Content, len(revs))
	errs := make([]error, len(revs))
	parallel(len(revs), func(i int) {
		if key, ok := keys[revs[i].ID]; ok {
			contents[i], errs[i] = openOne(key, revs[i].ID, revs[i].Sealed)
		}
	})
	opened = make([]Opened, 0, len(revs))
	for i, env := range revs {
		if _, ok := keys[env.ID]; !ok {
			keyless = append(keyless, env)
			continue
		}
		content, err := contents[i], errs[i]
		if err != nil {
			bad = append(bad, Unopened{Env: env, Err: fmt.Errorf("open the content of %s with its data key: %w", env.ID, err)})
			continue
		}
		events.Opened(env.Revision, content)
		opened = append(opened, Opened{Env: env, Content: content})
	}
	return opened, bad, keyless
}

// parallel runs fn(0..n-1) over the machine's cores, in contiguous shares.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/64)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	share := (n + workers - 1) / workers
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(from, to int) {
			defer wg.Done()
			for i := from; i < to; i++ {
				fn(i)
			}
		}(w*share, min((w+1)*share, n))
	}
	wg.Wait()
}

// ResolveFences fills in the user id of each fence that names its user only by
// reference (a version 2 memory.erased record), from the erasure's request in
// loom.erasure_ledger, in one query. A fence whose request was swept is left
// unresolved: its scope's records were keyless long before, so no follower holds them.
func ResolveFences(ctx context.Context, q Querier, fences []*erasure.Fence) error {
	var orgs, ids []string
	for _, f := range fences {
		if f.Unresolved() {
			orgs, ids = append(orgs, f.Org), append(ids, f.ErasureID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT l.org, l.id::text, loom.ledger_user(l.org, l.scope)
		FROM loom.erasure_ledger l
		JOIN unnest($1::text[], $2::text[]) AS b(org, id) ON l.org = b.org AND l.id::text = b.id`, orgs, ids)
	if err != nil {
		return fmt.Errorf("read the users of erasures: %w", err)
	}
	defer rows.Close()
	users := map[[2]string]string{}
	for rows.Next() {
		var org, id, user string
		if err := rows.Scan(&org, &id, &user); err != nil {
			return fmt.Errorf("read the users of erasures: %w", err)
		}
		users[[2]string{org, id}] = user
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the users of erasures: %w", err)
	}
	for _, f := range fences {
		if f.Unresolved() {
			f.UserID = users[[2]string{f.Org, f.ErasureID}]
		}
	}
	return nil
}

// ResolveRecordFences is ResolveFences over the fences of decoded records.
func ResolveRecordFences(ctx context.Context, q Querier, recs []Record) error {
	var fs []*erasure.Fence
	for i := range recs {
		if recs[i].Fence != nil {
			fs = append(fs, recs[i].Fence)
		}
	}
	return ResolveFences(ctx, q, fs)
}
