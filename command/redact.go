package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/outbox"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/route"
)

// memory.redact scrubs one historical version's text in place: in the journal, and in
// the later versions of its key that copy it (a pin, a delete's tombstone, a
// restatement: the redaction lineage), the head included when it is such a copy that
// is not live. It refuses a lineage that reaches the live head (delete the key first):
// the memory's current text is not history. One transaction, under the namespace's
// generation lock as a commit takes it, destroys the lineage's data keys, so the topic
// never opens that text again, and queues a memory.redacted record, on which the
// projector scrubs ClickHouse's history and retires the search rows that hold it. A
// retry finds the same lineage (a scrub keeps the content hash) and covers it again.

// redactBody is the body of POST .../memories/{key}:redact.
type redactBody struct {
	copyBody
	Version versionParam `json:"version"`
}

// versionParam is a version given as a JSON number or as its decimal text
// (version_text, exact for a JavaScript caller).
type versionParam int64

func (v *versionParam) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err == nil {
		b = []byte(text)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n <= 0 {
		return httperr.Validation("version", "version must be the version (or version_text) of one revision of the key")
	}
	*v = versionParam(n)
	return nil
}

// journalVersion is one revision of a key, as the redaction reads it.
type journalVersion struct {
	seq     int64
	version int64
	sha     string
	row     *memrow.Row
}

// redactionLineage is the named version and the versions after it that copy its text,
// from versions (the key's revisions from the named one on, in version order). It
// refuses a lineage that reaches a head that is not deleted.
func redactionLineage(versions []journalVersion, named int64, head *memrow.Row) ([]journalVersion, error) {
	if len(versions) == 0 || versions[0].version != named {
		return nil, httperr.NotFound("the key has no such version")
	}
	lineage := versions[:1]
	for _, v := range versions[1:] {
		if v.sha != versions[0].sha {
			break
		}
		lineage = append(lineage, v)
	}
	if last := lineage[len(lineage)-1]; head != nil && last.version == head.Version && !head.Tombstone {
		return nil, httperr.New(http.StatusConflict, CodePreconditionFailed,
			"the memory's live head holds this text: delete the memory first, then redact the version")
	}
	return lineage, nil
}

// redactCall is a memory.redact of the key the route and the body name.
type redactCall struct {
	requestID      string
	namespace, key string
	names          route.Names
	version        int64
}

// redactAnswer is what memory.redact answers.
type redactAnswer struct {
	MemoryID         string    `json:"memory_id"`
	MemoryKey        string    `json:"memory_key"`
	Agent            string    `json:"agent"`
	UserID           string    `json:"user_id"`
	SessionID        string    `json:"session_id"`
	Version          int64     `json:"version"`
	VersionText      string    `json:"version_text"`
	RedactedVersions []string  `json:"redacted_versions"`
	Seq              int64     `json:"seq"`
	Event            string    `json:"event"`
	RedactedAt       time.Time `json:"redacted_at"`
	// ForgottenTurns counts the conversation's turns the redacted versions were drawn
	// from, deleted with their data keys.
	ForgottenTurns int64 `json:"forgotten_turns"`
}

// redact is memory.redact.
func (s *Service) redact(ctx context.Context, p auth.Principal, r redactCall) (*redactAnswer, error) {
	id, err := keyIdentity(p, r.namespace, r.key, r.names)
	if err != nil {
		return nil, err
	}
	if err := s.refuseDeletedNamespace(ctx, p.Org, r.namespace); err != nil {
		return nil, err
	}
	return s.redactVersion(ctx, p, id, r.version, r.requestID, nil)
}

// redactVersion redacts a version of a key and the versions that copy it. withdrawal
// is an erasure's withdrawal of a promoted copy (withdrawCopy), nil otherwise: its
// record asks the projection to drop the copy's rows (events.Withdrawal).
func (s *Service) redactVersion(ctx context.Context, p auth.Principal, id memrow.Identity, version int64, requestID string,
	withdrawal *events.Withdrawal) (*redactAnswer, error) {
	var ans *redactAnswer
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now().UTC()
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.cfg.CommitLockTimeout.Milliseconds())); err != nil {
			return err
		}
		// The generation lock first, as every commit takes it: no commit of the
		// namespace lands between the reads below and the scrub.
		seq, err := generations.Bump(ctx, tx, id.Org, id.Namespace)
		if errors.Is(err, generations.ErrUnwritten) {
			return httperr.NotFound("memory not found")
		}
		if err != nil {
			return fmt.Errorf("advance the generation: %w", err)
		}
		head, err := heads.Lock(ctx, tx, id)
		if err != nil {
			return fmt.Errorf("lock the head: %w", err)
		}
		if head == nil || !p.Sees(head.UserID, head.SessionID) {
			return httperr.NotFound("memory not found")
		}
		versions, err := keyVersionsFrom(ctx, tx, id, version)
		if err != nil {
			return err
		}
		lineage, err := redactionLineage(versions, version, head)
		if err != nil {
			return err
		}
		named := lineage[0]
		seqs := make([]int64, len(lineage))
		texts := make([]string, len(lineage))
		redacted := make([]int64, len(lineage))
		for i, v := range lineage {
			seqs[i], texts[i], redacted[i] = v.seq, memrow.VersionText(v.version), v.version
		}
		// A version the entity extractor amended is two revisions of one version.
		texts, redacted = slices.Compact(texts), slices.Compact(redacted)
		prev, err := versionBefore(ctx, tx, id, version)
		if err != nil {
			return fmt.Errorf("read the version before the redacted one: %w", err)
		}
		refKey, err := s.userRefs.Current(ctx, id.Org)
		if err != nil {
			return err
		}
		env, err := redactionRecord(named.row, refKey.Key, prev, redacted, p.Actor(), requestID, seq, now)
		if err != nil {
			return err
		}
		env.Redaction.Withdrawal = withdrawal
		b := &pgx.Batch{}
		if err := s.queueScrub(b, id, head, lineage, seqs); err != nil {
			return err
		}
		// The spellings the entity extractor read in this memory's text go with it.
		queueForgetAliases(b, id.Org, id.Namespace, named.row.MemoryID)
		// So do the conversation's turns it was drawn from (internal/evidence).
		var forgotTurns int64
		evidence.QueueForgetSourcesOf(b, id.Org, id.Namespace, named.row.MemoryID, redacted, &forgotTurns)
		if err := s.queueGenerationRecord(b, env, refKey.Gen); err != nil {
			return err
		}
		outbox.QueueNotify(b)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("scrub the versions and destroy their keys: %w", err)
		}
		ans = &redactAnswer{MemoryID: named.row.MemoryID, MemoryKey: id.MemoryKey, Agent: id.Agent, UserID: id.UserID,
			SessionID: id.SessionID, Version: version, VersionText: memrow.VersionText(version), RedactedVersions: texts,
			Seq: seq, Event: string(events.TypeRedacted), RedactedAt: now, ForgottenTurns: forgotTurns}
		return nil
	})
	if err != nil {
		var he *httperr.Error
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, commitError(err)
	}
	return ans, nil
}

// queueScrub queues on b the scrub of the lineage's revisions (seqs), and of the head
// when it is the lineage's last, and the destruction of their data keys. What the rows
// keep of their text, their identity, is sealed under a key of the redaction's own,
// kept on each scrubbed revision (migration 175).
func (s *Service) queueScrub(b *pgx.Batch, id memrow.Identity, head *memrow.Row, lineage []journalVersion, seqs []int64) error {
	key, storedKey, err := kek.NewKey(s.kek)
	if err != nil {
		return err
	}
	sealed, err := heads.Redacted(id, key)
	if err != nil {
		return err
	}
	// The named version takes this redaction's time; a copy keeps its first.
	queueScrubRevisions(b, id, scrubbedFields, seqs, lineage[0].seq, sealed, storedKey)
	if lineage[len(lineage)-1].version == head.Version {
		// The head is the lineage's last revision (a tombstone copying its text), whose
		// redaction key its sealed text opens under.
		if !slices.Contains(seqs, head.Seq) {
			return fmt.Errorf("the head (seq %d) is not among the redacted revisions %v", head.Seq, seqs)
		}
		queueScrubHead(b, id, scrubbedFields, sealed)
	}
	queueDestroyKeys(b, id.Org, id.Namespace, seqs)
	return nil
}

// scrubbedFields replace a redacted row's text: no value, tags, entities or content
// hash (a row written before migration 101 holds its plain hash in its JSON).
const scrubbedFields = `{"value": null, "tags": [], "entities": [], "content_sha256": "", "redacted": true}`

// redactionRecord is the memory.redacted record: the named version's plain fields,
// the versions scrubbed, and no content (an empty body sealed under a key nobody
// keeps, as the envelope requires a sealed body on a revision type).
func redactionRecord(named *memrow.Row, userRefKey []byte, prev int64, versions []int64, actor, requestID string, seq int64, now time.Time) (*events.Envelope, error) {
	recordID := events.RecordID(named.Org, named.Namespace, seq)
	key, err := events.NewDataKey()
	if err != nil {
		return nil, err
	}
	sealed, err := events.Seal(key, recordID, &events.Content{})
	if err != nil {
		return nil, fmt.Errorf("seal the redaction record: %w", err)
	}
	rev, err := revisionOf(named, userRefKey, "memory.redact", "", prev, requestID)
	if err != nil {
		return nil, err
	}
	rev.Actor = actor
	return &events.Envelope{Version: events.EnvelopeVersion, ID: recordID, Type: events.TypeRedacted,
		Org: named.Org, Namespace: named.Namespace, Seq: seq, CommittedAt: now,
		Revision: rev, Sealed: sealed, Redaction: &events.Redaction{Versions: versions}}, nil
}
