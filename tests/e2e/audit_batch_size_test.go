package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/tests/testenv"
)

// A batch one entry past the members a note lists (events.MaxNoteMembers; a
// 1,000-entry batch's list would be some 40 KiB of ids on one record) leaves a batch
// audit row that names its members by count, digest and seq range: the record
// carrying the note is no larger than its neighbours beyond a few hundred bytes, the
// digest is the one the revisions' own rows give, and the chain verifies.
// events.TestABatchNoteListsItsMembersOnlyUpToTheLimit covers 256 and 1,000.
func TestABatchPastTheListedMembersNamesThemByCountAndDigest(t *testing.T) {
	ctx := context.Background()
	_, c, org := env.SharedOrgAPI(t)
	tc := c.Typed(t)
	ns := testenv.Unique(t, "audit-batch-size")
	pool, conn := env.PG(t), env.CH(t)
	const n = events.MaxNoteMembers + 1
	entries := make([]client.BulkEntry, n)
	for i := range entries {
		entries[i] = client.BulkEntry{Key: fmt.Sprintf("fact-%04d", i), Value: fmt.Sprintf("fact number %04d of the batch", i)}
	}
	ans, err := tc.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Written) != n {
		t.Fatalf("the batch wrote %d entries", len(ans.Written))
	}
	testenv.WaitProjected(t, pool, "main", org, ns)

	var revisions []string
	var batch *auditchain.Row
	if err := auditchain.EachRow(ctx, conn, auditchain.Namespace{Org: org, Namespace: ns}, 0, 0, func(r auditchain.Row) error {
		if r.Op == "memory.bulk_set.batch" {
			batch = &r
		} else {
			revisions = append(revisions, r.MemoryID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if batch == nil || len(revisions) != n {
		t.Fatalf("%d revision rows and batch row %+v", len(revisions), batch)
	}
	var detail struct {
		FirstSeq      int64    `json:"first_seq"`
		LastSeq       int64    `json:"last_seq"`
		Members       []string `json:"members"`
		MemberCount   int64    `json:"member_count"`
		MembersSHA256 string   `json:"members_sha256"`
	}
	if err := json.Unmarshal([]byte(batch.Detail), &detail); err != nil {
		t.Fatal(err)
	}
	if detail.FirstSeq != 1 || detail.LastSeq != n || detail.Members != nil ||
		detail.MemberCount != n || detail.MembersSHA256 != events.MembersDigest(revisions) {
		t.Fatalf("the batch row's account (%d bytes): %s; want seqs 1..%d, count %d and the revisions' digest %s",
			len(batch.Detail), batch.Detail, n, n, events.MembersDigest(revisions))
	}
	if len(batch.Detail) > 1024 {
		t.Fatalf("the batch row's account is %d bytes", len(batch.Detail))
	}
	if _, err := auditchain.Verify(ctx, conn, pool, org, ns); err != nil {
		t.Fatalf("the chain with the batch row: %v", err)
	}

	// On the topic, the record that carries the note is its neighbours' size.
	recs := env.NamespaceRecords(t, org, ns)
	largest, last := 0, 0
	for _, r := range recs {
		if r.Seq == n {
			last = len(r.Value)
		} else {
			largest = max(largest, len(r.Value))
		}
	}
	if last == 0 || last > largest+1024 {
		t.Fatalf("the note's record is %d bytes, its largest neighbour %d", last, largest)
	}
}
