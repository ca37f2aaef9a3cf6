package quality

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/corpus"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// Steps the measurements share: reading the corpora, the scripted semantic embedder,
// writing a namespace's rows, waiting for projections and writing a RESULTS file.

// newSemanticEmbedderServer starts the scripted OpenAI-compatible server embedding as
// semanticVector does, so a measurement sees a semantic model's score distribution.
func newSemanticEmbedderServer(t *testing.T) *llmtest.Server {
	srv := llmtest.New(t)
	srv.EmbedDim(semanticDim)
	srv.EmbedWith(semanticVector)
	return srv
}

// readBothCorpora reads the personal-facts and conversation corpora, which the gates
// and HyDE measurements both run.
func readBothCorpora(t *testing.T) (personalCorpus, corpus.Conversations) {
	t.Helper()
	var personal personalCorpus
	b, err := os.ReadFile("personal.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &personal); err != nil {
		t.Fatalf("personal.json: %v", err)
	}
	return personal, readConversations(t)
}

// personalEntries are the personal facts as bulk_set entries.
func personalEntries(personal personalCorpus) []map[string]any {
	var entries []map[string]any
	for _, m := range personal.Memories {
		entries = append(entries, map[string]any{"key": m.Key, "value": m.Value})
	}
	return entries
}

// dialogueEntries are dialogue i's turns as bulk_set entries, each valid at its time.
func dialogueEntries(conv corpus.Conversations, i int) []map[string]any {
	var entries []map[string]any
	for _, s := range conv.Dialogues[i].Sessions {
		for _, turn := range s.Turns {
			entries = append(entries, map[string]any{"key": turn.Key, "value": turn.Value, "valid_at": turn.ValidAt})
		}
	}
	return entries
}

// bulkSetOrFatal makes ns append-only and writes entries to it, failing the test on
// any status but 200.
func bulkSetOrFatal(t *testing.T, client *testenv.Client, ns string, entries []map[string]any) {
	t.Helper()
	client.AppendOnly(t, ns)
	body, _ := json.Marshal(map[string]any{"entries": entries})
	if r := client.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:bulkSet", body); r.Status != http.StatusOK {
		t.Fatalf("bulk_set %s: %d %s", ns, r.Status, r.Body)
	}
}

// waitForProjections runs the first search of each namespace, which waits for its
// projection, so the measured searches see every row.
func waitForProjections(ctx context.Context, t *testing.T, c *testenv.Client, namespaces []string) {
	t.Helper()
	for _, ns := range namespaces {
		if _, err := search(ctx, c, ns, "hello", fusedTopK, "weighted", nil); err != nil {
			t.Fatalf("first search: %v", err)
		}
	}
}

// verdictCounts is the report's "answerable abstained by verdict" cell, in a fixed
// verdict order.
func verdictCounts(falseVerdicts map[string]int) string {
	var vs []string
	for _, v := range []string{"no_match", "below_threshold", "low_calibrated_confidence", "ungrounded_identifier"} {
		if n := falseVerdicts[v]; n > 0 {
			vs = append(vs, fmt.Sprintf("%s %d", v, n))
		}
	}
	return strings.Join(vs, ", ")
}

// logAndWriteResults logs the report and, with LOOM_QUALITY_WRITE=1, writes it to file.
func logAndWriteResults(t *testing.T, file, md string) {
	t.Helper()
	t.Log("\n" + md)
	if os.Getenv("LOOM_QUALITY_WRITE") == "1" {
		if err := os.WriteFile(file, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
