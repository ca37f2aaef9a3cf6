package outbox

import (
	"bytes"
	"context"
	"crypto/aes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
)

// A revision's record is queued without its sealed content (migration 127): the
// journal's row of the same seq holds the memory's text sealed already, and copying it
// sealed again into the outbox (with the vectors, about 6.5 kB at 384 dimensions) made
// every commit flush it to the WAL and the relay delete it. The row keeps the envelope
// encoded with StubSealed in the content's place, so its plain fields read as any
// record's (an erasure's scope reads them), and in `vectors` what the journal lacks:
// the vectors, sealed under the revision's data key. The relay seals the content when
// it publishes (Complete), from the journal's text and these vectors, into the same
// envelope bytes the commit would have queued.

// Vectors are a revision's vectors as its record's sealed content carries them.
type Vectors struct {
	Embedding    []float32   // the value's; nil: none
	KeyEmbedding []float32   // the key's words'; nil: none
	Chunks       [][]float32 // a long value's windows', in order
}

// RevisionContent is the content a revision's record seals: row's key, text, user,
// agent, session and digest, the vectors, and the salt of the commitment its plain fields carry
// (auditchain.SubjectSalt, derived from dataKey).
func RevisionContent(row *memrow.Row, v Vectors, dataKey []byte) *events.Content {
	var chunks []events.Vector
	for _, c := range v.Chunks {
		chunks = append(chunks, c)
	}
	return &events.Content{
		MemoryKey: row.MemoryKey, Value: row.Value, Tags: row.Tags, Entities: row.Entities,
		EntityTypes: row.EntityTypes, Relations: row.Relations,
		Embedding: v.Embedding, KeyEmbedding: v.KeyEmbedding, ChunkEmbeddings: chunks,
		UserID: row.UserID, ContentSHA256: row.ContentSHA256,
		SubjectSalt: auditchain.SubjectSalt(dataKey, events.RecordID(row.Org, row.Namespace, row.Seq)),
		Agent:       row.Agent, SessionID: row.SessionID,
	}
}

// StubSealed stands in for the sealed content of an envelope queued by reference: it
// has sealed content's form, so the envelope encodes and decodes, and opens under no
// key. Complete puts the content in its place.
func StubSealed() *events.Sealed {
	return &events.Sealed{Alg: events.SealAlg, Nonce: make([]byte, 12), Ciphertext: make([]byte, 16)}
}

// stubField is StubSealed as an encoded envelope carries it. The key and its quotes
// cannot occur inside an encoded string (a quote is escaped there), and the envelope
// has one sealed field.
var stubField = func() []byte {
	b, err := json.Marshal(StubSealed())
	if err != nil {
		panic(err)
	}
	return append([]byte(`"sealed":`), b...)
}()

// SealVectors seals v, raw, under a revision's data key, for its outbox row.
func SealVectors(dataKey []byte, v Vectors) ([]byte, error) {
	all := append([][]float32{v.Embedding, v.KeyEmbedding}, v.Chunks...)
	n := 4
	for _, vec := range all {
		n += 4 + 4*len(vec)
	}
	raw := make([]byte, 0, n+aes.BlockSize) // room for the seal's padding: sealed in place
	raw = binary.LittleEndian.AppendUint32(raw, uint32(len(all)))
	for _, vec := range all {
		raw = binary.LittleEndian.AppendUint32(raw, uint32(len(vec)))
		for _, f := range vec {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
		}
	}
	sealed, err := rowseal.SealOwned(dataKey, rowseal.LabelVectors, raw)
	if err != nil {
		return nil, fmt.Errorf("seal the revision's vectors: %w", err)
	}
	return sealed, nil
}

// openVectors opens what SealVectors sealed.
func openVectors(dataKey, sealed []byte) (Vectors, error) {
	raw, err := rowseal.Open(dataKey, rowseal.LabelVectors, sealed)
	if err != nil {
		return Vectors{}, err
	}
	next := func() (uint32, bool) {
		if len(raw) < 4 {
			return 0, false
		}
		u := binary.LittleEndian.Uint32(raw)
		raw = raw[4:]
		return u, true
	}
	count, ok := next()
	if !ok || count < 2 {
		return Vectors{}, errors.New("the sealed vectors are truncated")
	}
	all := make([][]float32, count)
	for i := range all {
		dim, ok := next()
		if !ok || uint64(len(raw)) < 4*uint64(dim) {
			return Vectors{}, errors.New("the sealed vectors are truncated")
		}
		if dim == 0 {
			continue
		}
		vec := make([]float32, dim)
		for j := range vec {
			vec[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		raw = raw[4*dim:]
		all[i] = vec
	}
	return Vectors{Embedding: all[0], KeyEmbedding: all[1], Chunks: all[2:]}, nil
}

// Journal is what the relay reads of the revision a row references, in the same read
// as the row: the key its JSON keeps (a row sealed before migration 171; the text
// sealed after holds it), the user's reference (its column), the text sealed at rest
// and the data key as stored (wrapped). Sealed or DataKey nil: the revision was
// redacted or erased since it was queued. The user is the one the text names
// (migration 155 on); UserID names it for a text that names none: NameUsers sets it
// from UserRef.
type Journal struct {
	MemoryKey, UserID string
	UserRef           string
	// Agent and SessionID are the writer's, which the content seals (envelope version
	// 3): the journal row's JSON's, which its opened text overrides (heads.OpenText).
	Agent, SessionID string
	Sealed           []byte
	DataKey          []byte
	opened           *openedText // OpenTexts' work, for Complete
}

// openedText is a referenced revision's text opened: its data key and the row it
// fills, or why it did not open.
type openedText struct {
	key []byte
	rev *memrow.Row
	err error
}

// ErrUnopened is a referenced revision whose data key, which exists, does not open
// its text or vectors: a damaged row.
var ErrUnopened = errors.New("the revision's data key does not open it")

// OpenTexts opens the text of each row queued by reference whose revision is still
// journaled, under its data key (unwrap opens the key as stored), for Complete to
// seal. It returns the rows whose text does not name their user, a row sealed before
// migration 155: NameUsers names them. A key or text that does not open is Complete's
// error.
func OpenTexts(rows []Row, unwrap func(stored []byte) ([]byte, error)) (unnamed []*Row) {
	for i := range rows {
		o := openJournal(rows[i], unwrap)
		rows[i].Journal.opened = o
		if o != nil && o.err == nil && o.rev.UserID == "" && !bareRef(rows[i].Journal.UserRef) {
			unnamed = append(unnamed, &rows[i])
		}
	}
	return unnamed
}

// bareRef reports whether a user column holds no reference but the user itself, as
// loom.user_name reads it: none, or the default identity.
func bareRef(ref string) bool { return ref == "" || ref == memrow.DefaultIdentity }

// NameUsers names, in one round trip, the users of rows OpenTexts found unnamed, from
// their references as loom.user_name does.
func NameUsers(ctx context.Context, q Querier, rows []*Row) error {
	if len(rows) == 0 {
		return nil
	}
	orgs, refs := make([]string, len(rows)), make([]string, len(rows))
	for i, row := range rows {
		orgs[i], refs[i] = row.Org, row.Journal.UserRef
	}
	names, err := q.Query(ctx, `SELECT coalesce(loom.user_name(u.org, u.ref), '')
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(org, ref, i) ORDER BY u.i`, orgs, refs)
	if err != nil {
		return fmt.Errorf("name the users of the outbox's revisions: %w", err)
	}
	named, err := pgx.CollectRows(names, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("name the users of the outbox's revisions: %w", err)
	}
	if len(named) != len(rows) {
		return fmt.Errorf("name the users of the outbox's revisions: %d names for %d rows", len(named), len(rows))
	}
	for i, row := range rows {
		row.Journal.UserID = named[i]
		if row.Journal.opened != nil && row.Journal.opened.rev != nil {
			row.Journal.opened.rev.UserID = named[i]
		}
	}
	return nil
}

// openJournal opens row's referenced text: nil when the row is not queued by reference
// or its revision is no longer journaled. The user is the text's, else Journal.UserID,
// else the column's when it holds no reference (bareRef).
func openJournal(row Row, unwrap func(stored []byte) ([]byte, error)) *openedText {
	if row.Vectors == nil || row.Journal.Sealed == nil || row.Journal.DataKey == nil {
		return nil
	}
	recordID := events.RecordID(row.Org, row.Namespace, row.Seq)
	key, err := unwrap(row.Journal.DataKey)
	if err != nil {
		return &openedText{err: fmt.Errorf("open the data key of %s: %w", recordID, err)}
	}
	rev := &memrow.Row{Identity: memrow.Identity{Org: row.Org, Namespace: row.Namespace, Agent: row.Journal.Agent, UserID: row.Journal.UserID,
		SessionID: row.Journal.SessionID, MemoryKey: row.Journal.MemoryKey}, Seq: row.Seq}
	if err := heads.OpenText(key, row.Journal.Sealed, rev); err != nil {
		return &openedText{err: fmt.Errorf("%w: %s text: %v", ErrUnopened, recordID, err)}
	}
	if rev.UserID == "" && bareRef(row.Journal.UserRef) {
		rev.UserID = row.Journal.UserRef
	}
	return &openedText{key: key, rev: rev}
}

// Complete is the record value of a row as it goes to the topic: the row's value as it
// is, or, for a row queued by reference (Vectors set), its envelope with the content
// sealed in the stub's place under the revision's data key, from its text as
// OpenTexts opened it (or as Complete opens it, unwrap opening the key as stored, when
// OpenTexts did not). A revision redacted or erased since carries nothing: its content
// is sealed empty under a key nobody keeps, as a republish seals it, so the record
// takes its seq and, like the one it stands for, opens under no stored key. dataKey is
// the revision's key when the content was sealed under it, nil otherwise (a row not
// queued by reference, or a revision redacted or erased since): the key the relay
// hands to its process's index follower (revisions.Handoff).
func Complete(row Row, unwrap func(stored []byte) ([]byte, error)) (value, dataKey []byte, err error) {
	if row.Vectors == nil {
		return row.Value, nil, nil
	}
	at := bytes.Index(row.Value, stubField)
	if at < 0 {
		return nil, nil, errors.New("the record queued by reference has no stand-in for its sealed content")
	}
	recordID := events.RecordID(row.Org, row.Namespace, row.Seq)
	opened := row.Journal.opened
	if opened == nil {
		opened = openJournal(row, unwrap)
	}
	var content *events.Content
	var key []byte
	if opened == nil {
		if key, err = events.NewDataKey(); err != nil {
			return nil, nil, err
		}
		content = &events.Content{}
	} else {
		if opened.err != nil {
			return nil, nil, opened.err
		}
		key = opened.key
		v, err := openVectors(key, row.Vectors)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s vectors: %v", ErrUnopened, recordID, err)
		}
		content = RevisionContent(opened.rev, v, key)
	}
	sealed, err := events.Seal(key, recordID, content)
	if err != nil {
		return nil, nil, err
	}
	// The sealed field is written straight into the value, sized once.
	head, tail := row.Value[:at+len(`"sealed":`)], row.Value[at+len(stubField):]
	out := make([]byte, 0, len(head)+events.SealedJSONLen(sealed)+len(tail))
	out = events.AppendSealedJSON(append(out, head...), sealed)
	if opened != nil {
		dataKey = key
	}
	return append(out, tail...), dataKey, nil
}
