package projector

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
)

// A record of envelope version 3 leaves rows of the chain's writer format: a revision's
// row keeps the agent and session its opened content named (under the commitment), a
// keyless revision's and a write's own row name neither, as a replay, which cannot open
// them, writes them; the rows of a version 2 record hash its clear agent and session,
// opened or not.
func TestAuditRowsOfVersion3RecordsAreOfTheWriterFormat(t *testing.T) {
	record := func(version int) *events.Envelope {
		rev := &events.Revision{Op: "memory.set", MemoryID: uuid.NewString(), Actor: "token:ops", SubjectCommitment: "c"}
		if version < 3 {
			rev.Agent, rev.SessionID = "scout", "s-1"
		}
		return &events.Envelope{Version: version, Type: events.TypeWritten, Org: "acme", Namespace: "support", Seq: 1,
			CommittedAt: time.Unix(1_790_000_000, 0), Revision: rev,
			Audit: &events.AuditNote{Kind: events.AuditBatch, Op: "memory.bulk_set", Actor: "token:ops", FirstSeq: 1, LastSeq: 1}}
	}
	opened := func(env *events.Envelope) *events.Envelope {
		events.Opened(env.Revision, &events.Content{MemoryKey: "k", Agent: "scout", SessionID: "s-1"})
		return env
	}
	for _, tc := range []struct {
		name           string
		row            *auditRow
		format         uint8
		agent, session string
	}{
		{"version 3, opened", revisionAudit(opened(record(3)), &events.Content{MemoryKey: "k"}), auditchain.FormatWriter, "scout", "s-1"},
		{"version 3, keyless", revisionAudit(record(3), &events.Content{}), auditchain.FormatWriter, "", ""},
		{"version 3, a write's own row", mustNote(t, opened(record(3))), auditchain.FormatWriter, "", ""},
		{"version 2, opened", revisionAudit(opened(record(2)), &events.Content{MemoryKey: "k"}), auditchain.FormatV1, "scout", "s-1"},
		{"version 2, keyless", revisionAudit(record(2), &events.Content{}), auditchain.FormatV1, "scout", "s-1"},
		{"version 2, a write's own row", mustNote(t, record(2)), auditchain.FormatV1, "scout", "s-1"},
	} {
		if r := tc.row; r.Format != tc.format || r.Agent != tc.agent || r.SessionID != tc.session {
			t.Errorf("%s: format %d agent %q session %q, want %d %q %q", tc.name, r.Format, r.Agent, r.SessionID, tc.format, tc.agent, tc.session)
		}
	}
}

func mustNote(t *testing.T, env *events.Envelope) *auditRow {
	t.Helper()
	out, err := appendNote(nil, env)
	if err != nil || len(out) != 1 {
		t.Fatalf("the note's row: %d rows, %v", len(out), err)
	}
	return out[0]
}
