package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/tests/testenv"
)

// Every record the suite produces follows the topic contract: its value is a valid
// envelope that the published JSON Schema accepts, its key is org/namespace, its
// CloudEvents headers match the envelope, and a namespace's seqs first appear in order.
// The search's hit goes out as the namespace's usage record, which takes the seq after
// the writes'.
func TestEveryRecordFollowsTheTopicContract(t *testing.T) {
	n, url := env.API(t, func(c *config.Config) {
		c.Command.UsagePublishInterval, c.Command.RecallPublishInterval = 100*time.Millisecond, 100*time.Millisecond
	})
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "topic")
	for _, v := range []any{"a string value", map[string]any{"nested": []any{1, "two"}}, 3.5} {
		c.Set(t, ns, "k", v)
	}
	if r := c.Search(t, ns, "a string value", 1); r.Status != 200 {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}

	schema := testenv.EnvelopeSchema(t)
	testenv.Eventually(t, 30*time.Second, "the search's usage record on the topic", func() bool {
		return len(env.NamespaceRecords(t, "acme", ns)) >= 4
	})

	records := env.TopicRecords(t)
	if len(records) < 3 {
		t.Fatalf("only %d records on the topic", len(records))
	}
	lastSeq := map[string]int64{}
	held := map[string]map[int64]bool{} // seqs past a gap no erasure has closed yet
	for _, r := range records {
		testenv.CheckSchema(t, schema, fmt.Sprintf("record at %d/%d", r.Partition, r.Offset), r.Value)
		e, err := events.Decode(r.Value)
		if err != nil {
			t.Fatalf("record at offset %d: %v", r.Offset, err)
		}
		if string(r.Key) != e.Org+"/"+e.Namespace {
			t.Fatalf("record key %q for an envelope of %s/%s", r.Key, e.Org, e.Namespace)
		}
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if hs["ce_specversion"] != "1.0" || hs["ce_id"] != e.ID || hs["ce_type"] != string(e.Type) ||
			hs["ce_source"] == "" || hs["ce_time"] == "" || hs["content-type"] != "application/json" {
			t.Fatalf("CloudEvents headers %v do not match envelope %s (%s)", hs, e.ID, e.Type)
		}
		// A relay may publish a record again (at least once), never a namespace's records
		// out of order. A record past a gap is held, as docs/events.md tells consumers; only
		// an erasure's record closes a gap (the scope's records it withdrew before they
		// were published, which other scopes' records may follow on the topic).
		key := string(r.Key)
		switch {
		case e.Seq <= lastSeq[key]:
		case e.Seq == lastSeq[key]+1:
			lastSeq[key] = e.Seq
			for held[key][lastSeq[key]+1] {
				delete(held[key], lastSeq[key]+1)
				lastSeq[key]++
			}
		case e.Type == events.TypeErased:
			delete(held, key)
			lastSeq[key] = e.Seq
		default:
			if held[key] == nil {
				held[key] = map[int64]bool{}
			}
			held[key][e.Seq] = true
		}
		if (e.Type.IsRevision() && e.Sealed == nil) || bytes.Contains(r.Value, []byte("a string value")) {
			t.Fatalf("record %s carries its content in the clear", e.ID)
		}
	}
	for key, seqs := range held {
		if len(seqs) == 0 {
			continue
		}
		t.Errorf("%s: records %v follow seq %d across a gap no erasure closed", key, seqs, lastSeq[key])
	}
	if lastSeq["acme/"+ns] != 4 {
		t.Fatalf("the namespace's records reached seq %d, want 4", lastSeq["acme/"+ns])
	}
	usage := usageRecordOf(t, records, "acme", ns, 4)
	if usage == nil || len(usage.Items) != 1 || usage.Items[0].Recalls != 1 || usage.Items[0].Touches != 0 {
		t.Fatalf("the namespace's seq 4: usage %+v; want the search's one recall of its one memory", usage)
	}
}

// usageRecordOf is the usage a namespace's record of seq carries (nil: none).
func usageRecordOf(t *testing.T, records []*kgo.Record, org, ns string, seq int64) *events.Usage {
	t.Helper()
	for _, r := range records {
		e, err := events.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if e.Org == org && e.Namespace == ns && e.Seq == seq && e.Type == events.TypeUsageRecorded {
			return e.Usage
		}
	}
	return nil
}

// The README's tools work against the stores: kcat reads the topic, psql and
// clickhouse-client read the tables.
func TestReadmeToolsReadTheStores(t *testing.T) {
	n, url := env.API(t, nil)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "tools")
	c.Set(t, ns, "k", "seen by the command-line tools")
	if r := c.Search(t, ns, "command-line tools", 1); r.Status != 200 {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		// psql's session opens the rows as loomd's do: with the KEK's session setting.
		cmd.Env = append(os.Environ(), "PGOPTIONS=-c "+kek.SessionParam+"="+env.KEKSession(t))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run("kcat", "-b", strings.Join(env.Stack.Kafka.Brokers(), ","), "-C", "-t", "loom.memory.revisions.v1", "-e", "-q", "-f", "%k %h\n")
	if !strings.Contains(out, "acme/"+ns+" ") || !strings.Contains(out, "ce_type=memory.written") {
		t.Fatalf("kcat did not show the namespace's record:\n%s", out)
	}
	out = run("psql", env.Stack.Postgres.DSN(), "-At", "-c", "SELECT loom.opened_row(row, sealed, org, namespace, seq)->'value' FROM loom.memory_current WHERE namespace = '"+ns+"'")
	if strings.TrimSpace(out) != `"seen by the command-line tools"` {
		t.Fatalf("psql read %q", out)
	}
	port := strings.TrimPrefix(env.Stack.ClickHouse.Addr(), "127.0.0.1:")
	out = run("clickhouse-client", "--host", "127.0.0.1", "--port", port, "--query",
		"SELECT value FROM loom.memory FINAL WHERE namespace = '"+ns+"'")
	if strings.TrimSpace(out) != `"seen by the command-line tools"` {
		t.Fatalf("clickhouse-client read %q", out)
	}
}
