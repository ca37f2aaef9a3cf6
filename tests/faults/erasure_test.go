package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/command/relay"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/tests/testenv"
)

// erasureSpace writes, in a fresh namespace, memories of alice (the scope to erase)
// and of bob, each holding a word of its own, and waits until they are searchable.
func erasureSpace(t *testing.T, c *testenv.Client, prefix string) (ns, aliceWord, bobWord string) {
	t.Helper()
	ns = testenv.Unique(t, prefix)
	c.AppendOnly(t, ns)
	stamp := time.Now().UnixNano() % 1_000_000
	aliceWord, bobWord = fmt.Sprintf("aword%06d", stamp), fmt.Sprintf("bword%06d", stamp)
	for _, w := range []struct{ user, word string }{{"alice", aliceWord}, {"bob", bobWord}} {
		for _, v := range []string{"keeps the %s passport in the blue drawer", "moved the %s passport to the red drawer"} {
			body := map[string]any{"value": w.user + " " + fmt.Sprintf(v, w.word), "user_id": w.user, "tags": []string{"tag-" + w.word}}
			if r := c.Put(t, ns, w.user+"-passport-"+w.word, body); r.Status != http.StatusOK {
				t.Fatalf("set: %d %s", r.Status, r.Body)
			}
		}
		if r := c.Put(t, ns, w.user+"-diary", map[string]any{"value": w.user + " wrote " + w.word + " in the diary", "user_id": w.user}); r.Status != http.StatusOK {
			t.Fatalf("set: %d %s", r.Status, r.Body)
		}
	}
	if r := c.Search(t, ns, aliceWord+" passport", 3); r.Status != http.StatusOK || !strings.Contains(string(r.Body), aliceWord) {
		t.Fatalf("before the erasure, alice's memory is not searchable: %d %s", r.Status, r.Body)
	}
	return ns, aliceWord, bobWord
}

// erasedEndState checks what every completed erasure of alice in ns leaves: nothing of
// hers in either store, bob's memories served, every counted table counted at zero.
func erasedEndState(t *testing.T, c *testenv.Client, view map[string]any, org, ns, aliceWord, bobWord string) {
	t.Helper()
	pool, conn := env.PG(t), env.CH(t)
	if view["residue_count"] != float64(0) {
		t.Fatalf("residue: %v", view)
	}
	for key, n := range view["census"].(map[string]any) {
		if n != float64(0) {
			t.Errorf("census of %s: %v", key, n)
		}
	}
	for table, n := range testenv.ScopeRows(t, pool, conn, org, ns, "alice", 0) {
		if n != 0 {
			t.Errorf("%s holds %d of alice's rows", table, n)
		}
	}
	for table, n := range testenv.TextRows(t, conn, org, ns, aliceWord) {
		if n != 0 {
			t.Errorf("%s holds %d rows with alice's text", table, n)
		}
	}
	if r := c.Search(t, ns, aliceWord+" passport", 5); r.Status != http.StatusOK || strings.Contains(string(r.Body), aliceWord) {
		t.Fatalf("search after the erasure: %d %s", r.Status, r.Body)
	}
	if r := c.Search(t, ns, bobWord+" passport", 5); r.Status != http.StatusOK || !strings.Contains(string(r.Body), bobWord) {
		t.Fatalf("bob's memory is no longer served: %d %s", r.Status, r.Body)
	}
}

// An erasure saga stopped after any of its steps, as a crash would stop it, is
// completed by erasure_recovery on another process, and ends where an erasure that
// ran through ends. A census that finds residue (a row a stale publisher landed
// below the fence) re-opens the step that owns the table, which then runs again.
func TestErasureResumesAfterAStopAtEveryStep(t *testing.T) {
	p := projection(t)
	env.Relay(t, relay.Faults{})
	env.Projector(t, p)
	saga := func(c *config.Config) {
		c.Pipeline.Projection = p
		c.Command.Erasure.Lease = 2 * time.Second
		c.Command.Erasure.RecoveryInterval = 0 // this process runs the saga and stops it; it recovers nothing
	}
	// The faults each subtest stops the saga with, nil for none.
	var afterStep atomic.Pointer[func(step string) error]
	_, c, org := env.OrgAPI(t, saga, app.WithCommandFaults(command.Faults{AfterErasureStep: func(s string) error {
		if f := afterStep.Load(); f != nil {
			return (*f)(s)
		}
		return nil
	}}))
	// erasure_recovery runs in another process.
	env.API(t, func(c *config.Config) { saga(c); c.Command.Erasure.RecoveryInterval = 200 * time.Millisecond })

	ns, aliceWord, bobWord := erasureSpace(t, c, "whole")
	reference := c.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	if reference["attempts"] != float64(1) {
		t.Fatalf("an erasure that ran through took %v runs", reference["attempts"])
	}
	erasedEndState(t, c, reference, org, ns, aliceWord, bobWord)

	for _, step := range []string{"postgres", "quiet", "clickhouse", "census"} {
		t.Run("stopped after "+step, func(t *testing.T) {
			stop := func(s string) error {
				if s == step {
					return errors.New("killed after " + s)
				}
				return nil
			}
			afterStep.Store(&stop)
			defer afterStep.Store(nil)
			ns, aliceWord, bobWord := erasureSpace(t, c, step)
			r := c.Do(t, http.MethodPost, "/v1/erasures", []byte(fmt.Sprintf(`{"user_id": "alice", "namespace": %q}`, ns)))
			first := r.JSON(t)
			last := step == "census"
			if (last && (r.Status != http.StatusOK || first["status"] != "completed")) || (!last && (r.Status != http.StatusAccepted || first["status"] != "running")) {
				t.Fatalf("the stopped saga answered %d %s", r.Status, r.Body)
			}
			view := c.AwaitErasure(t, first["id"].(string), 60*time.Second)
			if runs := view["attempts"].(float64); (last && runs != 1) || (!last && runs < 2) {
				t.Fatalf("%v runs of a saga stopped after %s", runs, step)
			}
			if fmt.Sprint(view["removed"]) != fmt.Sprint(reference["removed"]) {
				t.Fatalf("the resumed erasure removed %v, one that ran through %v", view["removed"], reference["removed"])
			}
			erasedEndState(t, c, view, org, ns, aliceWord, bobWord)
		})
	}

	t.Run("residue re-opens its step", func(t *testing.T) {
		conn := env.CH(t)
		landed := false
		land := func(s string) error {
			if s != "clickhouse" || landed {
				return nil
			}
			landed = true
			// A stale publisher lands a row of the scope below the fence.
			b, err := conn.PrepareBatch(context.Background(), `INSERT INTO loom.memory_versions (org, namespace, agent, user_id,
				session_id, memory_key, version, memory_id, seq, value)`)
			if err != nil {
				return err
			}
			if err := b.Append(org, ns, "-", "alice", "-", "stale-"+aliceWord, uint64(1), uuid.New(), uint64(1), `"a stale `+aliceWord+`"`); err != nil {
				return err
			}
			return b.Send()
		}
		afterStep.Store(&land)
		defer afterStep.Store(nil)
		ns, aliceWord, bobWord = erasureSpace(t, c, "residue")
		view := c.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
		var reopened float64
		for _, s := range view["steps"].([]any) {
			if m := s.(map[string]any); m["name"] == "clickhouse" {
				reopened, _ = m["reopened"].(float64)
			}
		}
		if reopened != 1 {
			t.Fatalf("the census did not re-open the ClickHouse step once: %v", view["steps"])
		}
		erasedEndState(t, c, view, org, ns, aliceWord, bobWord)
	})
}

// A reset of the projection to the earliest offset after an erasure and a redaction
// brings nothing back: the records are still on the topic, but their data keys are
// gone, so the projector counts them unopenable and writes nothing of them, not even
// an audit row or an index term.
func TestResetAfterErasureAndRedactionBringsNothingBack(t *testing.T) {
	p := projection(t)
	n, url, _ := env.Serve(t, []string{"api", "projector"}, func(c *config.Config) { c.Pipeline.Projection = p })
	org := testenv.Unique(t, "org")
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	env.Relay(t, relay.Faults{})
	conn := env.CH(t)
	ns, aliceWord, bobWord := erasureSpace(t, c, "replay")

	// bob's vault: a secret, deleted, then redacted with its tombstone.
	secret := fmt.Sprintf("vword%06d", time.Now().UnixNano()%1_000_000)
	v1 := c.Put(t, ns, "vault", map[string]any{"value": "the vault code is " + secret, "user_id": "bob", "tags": []string{"tag-" + secret}}).JSON(t)
	c.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/vault?user_id=bob", nil)
	c.Search(t, ns, "vault code", 1)
	body, _ := json.Marshal(map[string]any{"version": v1["version_text"], "user_id": "bob"})
	if r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/vault:redact", body); r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	view := c.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	erasedEndState(t, c, view, org, ns, aliceWord, bobWord)
	group, topic := projector.Group(p), env.Config(nil).Pipeline.Topic
	testenv.Eventually(t, 30*time.Second, "the projection to commit its offsets", func() bool { return env.GroupCaughtUp(t, group, topic) })

	series := `loom_projector_unopenable_total{projection="` + p + `"}`
	before := metricValue(t, url, series)
	if r := c.Do(t, http.MethodPost, "/v1/admin/projections/"+p+":reset", []byte(`{"to": "earliest", "execute": true}`)); r.Status != http.StatusOK {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 60*time.Second, "the projection to replay the topic", func() bool { return env.GroupCaughtUp(t, group, topic) })
	// alice's three revisions and bob's two redacted ones cannot be opened any more.
	if skipped := metricValue(t, url, series) - before; skipped < 5 {
		t.Fatalf("the replay counted %.0f unopenable records, want at least 5", skipped)
	}
	erasedEndState(t, c, view, org, ns, aliceWord, bobWord)
	for table, n := range testenv.TextRows(t, conn, org, ns, secret) {
		if n != 0 {
			t.Errorf("after the replay, %s holds %d rows with the redacted text", table, n)
		}
	}
	if r := c.Search(t, ns, "the vault code is "+secret, 5); strings.Contains(string(r.Body), secret) {
		t.Fatalf("search serves the redacted text after the replay: %s", r.Body)
	}
}

// An erasure while the relay is down withdraws the scope's records from the outbox
// before they are published: their seqs never reach the topic, and the erasure's
// record lets the projection step over them, so its watermark reaches the generation
// and the other users' records after the gap are served.
func TestErasureWithdrawsUnpublishedRecordsAndTheProjectionJumpsTheGap(t *testing.T) {
	p := projection(t)
	env.Projector(t, p)
	_, c, org := env.OrgAPI(t, func(c *config.Config) {
		c.Pipeline.Projection = p
		c.Command.Erasure.RequestWait = 500 * time.Millisecond
	})
	pool := env.PG(t)
	ns := testenv.Unique(t, "withdrawn")
	c.AppendOnly(t, ns)
	for i := 0; i < 3; i++ {
		for _, user := range []string{"alice", "bob"} {
			body := map[string]any{"value": fmt.Sprintf("%s wrote unpublished fact number %d", user, i), "user_id": user}
			if r := c.Put(t, ns, fmt.Sprintf("%s-%d", user, i), body); r.Status != http.StatusOK {
				t.Fatalf("set: %d %s", r.Status, r.Body)
			}
		}
	}
	r := c.Do(t, http.MethodPost, "/v1/erasures", []byte(fmt.Sprintf(`{"user_id": "alice", "namespace": %q}`, ns)))
	if r.Status != http.StatusAccepted {
		t.Fatalf("an erasure waiting for the projection answered %d %s", r.Status, r.Body)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns); n != 4 {
		t.Fatalf("the outbox holds %d records, want bob's three and the erasure's", n)
	}
	env.Relay(t, relay.Faults{})
	view := c.AwaitErasure(t, r.JSON(t)["id"].(string), 60*time.Second)
	if removed := view["removed"].(map[string]any); removed["withdrawn"] != float64(3) {
		t.Fatalf("the erasure withdrew %v records, want alice's three", removed["withdrawn"])
	}
	gen := testenv.Generation(t, pool, org, ns)
	if wm := testenv.Watermark(t, pool, p, org, ns); wm != gen {
		t.Fatalf("the projection's watermark is %d, the generation %d", wm, gen)
	}
	var seqs []int64
	for _, rec := range env.NamespaceRecords(t, org, ns) {
		seqs = append(seqs, rec.Seq)
	}
	if fmt.Sprint(seqs) != "[2 4 6 7]" {
		t.Fatalf("the topic holds seqs %v, want bob's and the erasure's", seqs)
	}
	for i := 0; i < 3; i++ {
		q := fmt.Sprintf("bob wrote unpublished fact number %d", i)
		if r := c.Search(t, ns, q, 3); r.Status != http.StatusOK || !strings.Contains(string(r.Body), q) {
			t.Fatalf("bob's record after the gap is not served: %d %s", r.Status, r.Body)
		}
	}
	for table, n := range testenv.ScopeRows(t, pool, env.CH(t), org, ns, "alice", 0) {
		if n != 0 {
			t.Errorf("%s holds %d of alice's rows", table, n)
		}
	}
}
