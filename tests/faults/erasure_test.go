package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	typed "github.com/loomplane/loom/client"

	"github.com/google/uuid"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
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
	ctx, tc := context.Background(), c.Typed(t)
	for _, w := range []struct{ user, word string }{{"alice", aliceWord}, {"bob", bobWord}} {
		for _, v := range []string{"keeps the %s passport in the blue drawer", "moved the %s passport to the red drawer"} {
			req := typed.SetRequest{Value: w.user + " " + fmt.Sprintf(v, w.word), Identity: typed.Identity{UserID: w.user}, Tags: []string{"tag-" + w.word}}
			if _, err := tc.Set(ctx, ns, w.user+"-passport-"+w.word, req); err != nil {
				t.Fatalf("set: %v", err)
			}
		}
		if _, err := tc.Set(ctx, ns, w.user+"-diary", typed.SetRequest{Value: w.user + " wrote " + w.word + " in the diary", Identity: typed.Identity{UserID: w.user}}); err != nil {
			t.Fatalf("set: %v", err)
		}
	}
	if !searchFinds(t, c, ns, aliceWord+" passport", 3, aliceWord) {
		t.Fatalf("before the erasure, alice's memory is not searchable")
	}
	return ns, aliceWord, bobWord
}

// erasedEndState checks what every completed erasure of alice in ns leaves: nothing of
// hers in either store, bob's memories served, every counted table counted at zero.
func erasedEndState(t *testing.T, c *testenv.Client, view *typed.Erasure, org, ns, aliceWord, bobWord string) {
	t.Helper()
	pool, conn := env.PG(t), env.CH(t)
	if view.ResidueCount == nil || *view.ResidueCount != 0 {
		t.Fatalf("residue: %+v", view)
	}
	for key, n := range view.Census {
		if n != 0 {
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
	if searchFinds(t, c, ns, aliceWord+" passport", 5, aliceWord) {
		t.Fatalf("search after the erasure serves alice's text")
	}
	if !searchFinds(t, c, ns, bobWord+" passport", 5, bobWord) {
		t.Fatalf("bob's memory is no longer served")
	}
}

// searchFinds reports whether a search of ns for query serves a hit whose value or tags
// hold word; a search that fails fails the test.
func searchFinds(t *testing.T, c *testenv.Client, ns, query string, topK int, word string) bool {
	t.Helper()
	found, err := c.Typed(t).Search(context.Background(), ns, typed.SearchRequest{Query: query, TopK: topK})
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	return slices.ContainsFunc(found.Hits, func(h typed.Hit) bool {
		return strings.Contains(string(h.Value), word) || strings.Contains(strings.Join(h.Tags, " "), word)
	})
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
		// A saga's first run lasts one lease: long enough for the projector to apply the
		// erasure's mutations while other suites load the machine, short enough that
		// erasure_recovery soon takes over a stopped one.
		c.Command.Erasure.Lease = 5 * time.Second
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
	reference := c.Erasure(t, typed.ErasureRequest{UserID: "alice", Namespace: ns})
	if reference.Attempts != 1 {
		t.Fatalf("an erasure that ran through took %d runs", reference.Attempts)
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
			first, err := c.Typed(t).RequestErasure(context.Background(), typed.ErasureRequest{UserID: "alice", Namespace: ns})
			last := step == "census"
			if err != nil || (last && (first.Running || first.Status != "completed")) || (!last && (!first.Running || first.Status != "running")) {
				t.Fatalf("the stopped saga answered %+v %v", first, err)
			}
			view := c.AwaitSaga(t, first.ID, 60*time.Second)
			if runs := view.Attempts; (last && runs != 1) || (!last && runs < 2) {
				t.Fatalf("%d runs of a saga stopped after %s", runs, step)
			}
			if fmt.Sprint(view.Removed) != fmt.Sprint(reference.Removed) {
				t.Fatalf("the resumed erasure removed %v, one that ran through %v", view.Removed, reference.Removed)
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
		view := c.Erasure(t, typed.ErasureRequest{UserID: "alice", Namespace: ns})
		var reopened int
		for _, s := range view.Steps {
			if s.Name == "clickhouse" {
				reopened = s.Reopened
			}
		}
		if reopened != 1 {
			t.Fatalf("the census did not re-open the ClickHouse step once: %+v", view.Steps)
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
	ctx, tc, bob := context.Background(), c.Typed(t), typed.Identity{UserID: "bob"}
	v1, err := tc.Set(ctx, ns, "vault", typed.SetRequest{Value: "the vault code is " + secret, Identity: bob, Tags: []string{"tag-" + secret}})
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	tc.Delete(ctx, ns, "vault", bob, "")
	tc.Search(ctx, ns, typed.SearchRequest{Query: "vault code", TopK: 1})
	if _, err := tc.Redact(ctx, ns, "vault", typed.RedactRequest{Version: v1.VersionText, Identity: bob}); err != nil {
		t.Fatalf("redact: %v", err)
	}
	view := c.Erasure(t, typed.ErasureRequest{UserID: "alice", Namespace: ns})
	erasedEndState(t, c, view, org, ns, aliceWord, bobWord)
	group, topic := projector.Group(p), env.Config(nil).Pipeline.Topic
	testenv.Eventually(t, 30*time.Second, "the projection to commit its offsets", func() bool { return env.GroupCaughtUp(t, group, topic) })

	series := `loom_projector_unopenable_total{projection="` + p + `"}`
	before := metricValue(t, url, series)
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator})).Typed(t)
	if _, err := operator.ResetProjection(ctx, p, typed.ResetRequest{To: "earliest", Execute: true}); err != nil {
		t.Fatalf("reset: %v", err)
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
	if searchFinds(t, c, ns, "the vault code is "+secret, 5, secret) {
		t.Fatalf("search serves the redacted text after the replay")
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
	ctx, tc := context.Background(), c.Typed(t)
	for i := 0; i < 3; i++ {
		for _, user := range []string{"alice", "bob"} {
			req := typed.SetRequest{Value: fmt.Sprintf("%s wrote unpublished fact number %d", user, i), Identity: typed.Identity{UserID: user}}
			if _, err := tc.Set(ctx, ns, fmt.Sprintf("%s-%d", user, i), req); err != nil {
				t.Fatalf("set: %v", err)
			}
		}
	}
	first, err := tc.RequestErasure(ctx, typed.ErasureRequest{UserID: "alice", Namespace: ns})
	if err != nil || !first.Running {
		t.Fatalf("an erasure waiting for the projection answered %+v %v, want 202", first, err)
	}
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = $2`, org, ns); n != 4 {
		t.Fatalf("the outbox holds %d records, want bob's three and the erasure's", n)
	}
	env.Relay(t, relay.Faults{})
	view := c.AwaitSaga(t, first.ID, 60*time.Second)
	if view.Removed["withdrawn"] != 3 {
		t.Fatalf("the erasure withdrew %d records, want alice's three", view.Removed["withdrawn"])
	}
	// The saga's erasure.completed record (seq 8) follows the erasure's own.
	testenv.WaitProjected(t, pool, p, org, ns)
	if gen := testenv.Generation(t, pool, org, ns); gen != 8 {
		t.Fatalf("the generation is %d, want 8", gen)
	}
	var seqs []int64
	for _, rec := range env.NamespaceRecords(t, org, ns) {
		seqs = append(seqs, rec.Seq)
	}
	if fmt.Sprint(seqs) != "[2 4 6 7 8]" {
		t.Fatalf("the topic holds seqs %v, want bob's, the erasure's and its completion's", seqs)
	}
	for i := 0; i < 3; i++ {
		q := fmt.Sprintf("bob wrote unpublished fact number %d", i)
		if !searchFinds(t, c, ns, q, 3, q) {
			t.Fatalf("bob's record after the gap is not served: %q", q)
		}
	}
	for table, n := range testenv.ScopeRows(t, pool, env.CH(t), org, ns, "alice", 0) {
		if n != 0 {
			t.Errorf("%s holds %d of alice's rows", table, n)
		}
	}
}
