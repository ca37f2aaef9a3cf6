package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	kcommand "github.com/loomplane/loom/knowledge/command"
	"github.com/loomplane/loom/tests/testenv"
)

// manual is a document of about size bytes of text whose last paragraph, and only
// that, names a narwhal.
func manual(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "Section %d\n\nParagraph %d of the operations manual describes routine number %d in some detail, with its owner and its schedule.\n\n", i, i, i*7919)
	}
	b.WriteString("Closing notes\n\nThe narwhal escalation path ends at the duty manager.\n")
	return b.String()
}

// recordLimitedAPI is a shared API process whose topic record limit is 1 MiB, and an
// admin client of a fresh org.
func recordLimitedAPI(t *testing.T) (*app.Process, *testenv.Client, string) {
	n, url := env.Shared(t, "record-limit", func(cfg *config.Config) { cfg.Kafka.MaxRecordBytes = 1 << 20 })
	org := testenv.Unique(t, "org")
	return n, testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org})), org
}

// A document of a few megabytes (its record, chunks and vectors, ~11 MB) is published
// and searchable down to its last paragraph, like a small one. With the topic at
// Kafka's default message size (1 MB) the relay could never publish its record: it
// parked it, and searches answered without the document.
func TestALargeDocumentIsSearchableToItsEnd(t *testing.T) {
	_, c, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kn-large")
	a := kadd(t, c, ns, map[string]any{"source_uri": "manual.txt", "content": manual(3 << 20)})
	ans := ksearch(t, c, ns, map[string]any{"query": "narwhal escalation path"})
	if !slices.Contains(hitURIs(ans), "manual.txt") {
		t.Fatalf("a search for the last paragraph of a document of %v chunks found %v", a["chunk_count"], hitURIs(ans))
	}
}

// A document whose record runs past the topic's limit (LOOM_TOPIC_MAX_RECORD_BYTES) is
// refused with 413 DOCUMENT_TOO_LARGE and nothing is committed, rather than committed
// for a record the relay parks.
func TestADocumentPastTheTopicsRecordLimitIsRefused(t *testing.T) {
	_, c, _ := recordLimitedAPI(t)
	ns := testenv.Unique(t, "kn-limit")
	r := c.Do(t, http.MethodPost, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "manual.txt", "content": manual(512 << 10)}))
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "DOCUMENT_TOO_LARGE") || !strings.Contains(string(r.Body), "LOOM_TOPIC_MAX_RECORD_BYTES") {
		t.Fatalf("a document past the record limit: %d %s", r.Status, r.Body)
	}
	if r := kget(t, c, ns, "manual.txt"); r.Status != http.StatusNotFound {
		t.Fatalf("the refused document reads %d %s", r.Status, r.Body)
	}
	kadd(t, c, ns, map[string]any{"source_uri": "short.txt", "content": manual(64 << 10)})
}

// In an ingestion, a file whose record runs past the topic's limit fails alone with
// DOCUMENT_TOO_LARGE, and the step writes the other files and the job completes; it
// did not stall on the step's refused commit.
func TestAnIngestedFilePastTheTopicsRecordLimitFailsAlone(t *testing.T) {
	ctx := context.Background()
	// No workers role: the test steps the run itself.
	n, c, org := recordLimitedAPI(t)
	ns := testenv.Unique(t, "ki-limit")
	id := ingestJob(t, c, ns, []map[string]any{
		{"source_uri": "small.txt", "content": manual(8 << 10)},
		{"source_uri": "large.txt", "content": manual(512 << 10)},
	})
	run, err := n.Knowledge.ClaimIngestOf(ctx, org, "worker-limit", time.Minute)
	if err != nil || run == nil || run.Job().ID != id {
		t.Fatalf("claim: %v %v", run, err)
	}
	for done := false; !done; {
		if done, err = run.Step(ctx); err != nil {
			t.Fatalf("a step: %v", err)
		}
	}
	st := ingestStatus(t, c, ns, id)
	if st["state"] != "completed" || st["written"] != float64(1) || st["failed"] != float64(1) {
		t.Fatalf("the job: %v", st)
	}
	for _, f := range st["files"].([]any) {
		if f := f.(map[string]any); f["source_uri"] == "large.txt" && f["error_code"] != kcommand.CodeTooLarge {
			t.Errorf("the large file: %v", f)
		}
	}
	if r := kget(t, c, ns, "small.txt"); r.Status != http.StatusOK {
		t.Fatalf("the small file: %d %s", r.Status, r.Body)
	}
}
