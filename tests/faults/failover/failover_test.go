// Package failover fails a Postgres primary over to its synchronous standby under
// Loom, against real servers: the primary and the standby stream on loopback, Loom's
// roles run in-process, and the example consumer follows the topic as a downstream
// team would. The test consumes its stores (the primary ends fenced), so it has a
// package of its own.
package failover

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/tests/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.MainWith(m, testenv.Options{SyncStandby: true}, &env, nil)
}

const org = "acme"

// written is one write's answer.
type written struct {
	ns, key, value string
	status         int
	code           string
	outcomeUnknown bool
	seq, version   int64
}

func set(t *testing.T, c *testenv.Client, ns, key, value string) written {
	t.Helper()
	r := c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, []byte(fmt.Sprintf(`{"value": %q}`, value)))
	var body struct {
		Seq, Version int64 // a version is past 2^53: not read as a float
		Error        *struct {
			Code           string `json:"code"`
			OutcomeUnknown bool   `json:"outcome_unknown"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("answer to %s/%s is not JSON (%d): %s", ns, key, r.Status, r.Body)
	}
	w := written{ns: ns, key: key, value: value, status: r.Status, seq: body.Seq, version: body.Version}
	if body.Error != nil {
		w.code, w.outcomeUnknown = body.Error.Code, body.Error.OutcomeUnknown
	}
	return w
}

// The synchronous standby is cut while Loom writes. Writes then wait for it until the
// write deadline and answer 503 with outcome_unknown, committed on the primary alone
// and visible there; the relay reads them and holds them back, publishing nothing of
// them. The standby is promoted, the old primary fenced, Loom pointed at the new
// primary, and writing goes on, reusing the lost revisions' seqs for other content.
// Then no seq is on the topic with two contents, every acknowledged write is in the
// new primary's journal and on the topic, and the example consumer, reading the topic
// from the start, ends equal to that journal.
func TestFailoverPublishesOnlyWhatTheStandbyHeld(t *testing.T) {
	ctx := context.Background()
	const deadline = 1500 * time.Millisecond
	roles := []string{string(config.RoleCommand), string(config.RoleQuery), string(config.RoleRelay)}
	n, url, stopOld := env.Serve(t, roles, func(c *config.Config) { c.Command.WriteDeadline = deadline })
	token := env.Token(t, n, auth.NewToken{Org: org})
	// Created while the standby is attached: once it is cut, a token's insert waits for it.
	health := env.Operator(t, url)
	c := testenv.NewClient(url, token)
	nss := []string{testenv.Unique(t, "fo-a"), testenv.Unique(t, "fo-b")}
	c.AppendOnly(t, nss...)
	oldPrimary := env.PG(t)

	var acked, timedOut []written
	write := func(c *testenv.Client, round string, i int) written {
		ns := nss[i%len(nss)]
		w := set(t, c, ns, fmt.Sprintf("%s-%d", round, i), fmt.Sprintf("%s write %d in %s", round, i, ns))
		switch {
		case w.status == http.StatusOK:
			acked = append(acked, w)
		case w.status == http.StatusServiceUnavailable && w.code == "POSTGRES_UNAVAILABLE" && w.outcomeUnknown:
			timedOut = append(timedOut, w)
		default:
			t.Fatalf("write %s/%s answered %d %s; want 200, or a 503 POSTGRES_UNAVAILABLE with outcome_unknown", ns, w.key, w.status, w.code)
		}
		return w
	}
	for i := range 8 {
		if w := write(c, "before", i); w.status != http.StatusOK {
			t.Fatalf("write with the standby attached: %d %s", w.status, w.code)
		}
	}
	unpublished := func(pool *pgxpool.Pool) int64 {
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.outbox WHERE org = $1 AND namespace = ANY($2)`, org, nss)
	}
	testenv.Eventually(t, 30*time.Second, "the relay to publish the writes made with the standby attached", func() bool {
		return unpublished(oldPrimary) == 0
	})

	// Cut the standby: each write now waits for it until its deadline.
	if err := env.Stack.Standby.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if w := write(c, "cut", i); w.status != http.StatusServiceUnavailable {
			t.Fatalf("write with the standby cut answered %d", w.status)
		}
	}
	// What Postgres does with a commit whose standby wait was cut: pgx sends a cancel
	// request as it closes the cut connection, the server ends the wait, and the
	// primary holds the commit, visible to every session, and its outbox row.
	testenv.Eventually(t, 10*time.Second, "the timed-out writes to be visible on the primary", func() bool {
		return testenv.Int(t, oldPrimary, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = ANY($2) AND loom.opened_row(row, sealed, org, namespace, seq)->>'memory_key' LIKE 'cut-%'`,
			org, nss) == int64(len(timedOut))
	})
	t.Logf("%d writes timed out waiting for the standby; all are committed and visible on the primary alone", len(timedOut))

	// The relay reads them and holds them back, saying why.
	var held map[string]any
	testenv.Eventually(t, 30*time.Second, "the relay to report the rows it holds back", func() bool {
		pgState, _ := health.Do(t, http.MethodGet, "/v1/health?include=postgres", nil).JSON(t)["postgres"].(map[string]any)
		held, _ = pgState["relay"].(map[string]any)
		return held != nil && held["held_rows"] == float64(len(timedOut))
	})
	if held["reason"] != "standby_detached" {
		t.Fatalf("the relay holds %v rows for %q; want reason standby_detached", held["held_rows"], held["reason"])
	}
	metrics := string(health.Do(t, http.MethodGet, "/metrics", nil).Body)
	if want := fmt.Sprintf(`loom_relay_held_rows{reason="standby_detached"} %d`, len(timedOut)); !strings.Contains(metrics, want) {
		t.Fatalf("metrics lack %q", want)
	}
	if unpublished(oldPrimary) != int64(len(timedOut)) {
		t.Fatalf("outbox holds %d rows; want the %d timed-out writes", unpublished(oldPrimary), len(timedOut))
	}
	onTopic := seqsOnTopic(t)
	lost := map[seqID]bool{} // the timed-out writes' seqs on the old primary
	for _, w := range timedOut {
		var seq int64
		if err := oldPrimary.QueryRow(ctx, `SELECT seq FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, $3))`,
			org, w.ns, w.key).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		lost[seqID{w.ns, seq}] = true
		if _, ok := onTopic[seqID{w.ns, seq}]; ok {
			t.Fatalf("the timed-out write %s/%s (seq %d), which the standby never held, is on the topic", w.ns, w.key, seq)
		}
	}

	// Fail over: Loom and the old primary stop (fenced), the standby, started without
	// its primary, is promoted with exactly what it had received, and Loom comes back
	// on it. It has no standby of its own: local durability until one joins.
	stopOld()
	if err := env.Stack.Postgres.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.Stack.Standby.StartDetached(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Stack.Standby.Promote(); err != nil {
		t.Fatal(err)
	}
	newDSN := env.Stack.Standby.DSN()
	_, url, _ = env.Serve(t, roles, func(c *config.Config) {
		c.PG.DSN, c.PG.Durability, c.Command.WriteDeadline = newDSN, config.DurabilityLocal, deadline
	})
	c = testenv.NewClient(url, token)
	for i := range 8 {
		if w := write(c, "after", i); w.status != http.StatusOK {
			t.Fatalf("write on the new primary: %d %s", w.status, w.code)
		}
	}
	newCfg, err := pgxpool.ParseConfig(newDSN)
	if err != nil {
		t.Fatal(err)
	}
	newCfg.ConnConfig.RuntimeParams[kek.SessionParam] = env.KEKSession(t) // the journal's keys open as loomd's do
	newPrimary, err := pgxpool.NewWithConfig(ctx, newCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer newPrimary.Close()
	testenv.Eventually(t, 30*time.Second, "the relay on the new primary to publish", func() bool { return unpublished(newPrimary) == 0 })

	// No seq is on the topic with two contents, and the topic matches the journal.
	journal := readJournal(t, newPrimary, nss)
	onTopic = seqsOnTopic(t)
	published := 0
	for id, copies := range onTopic {
		published++
		for _, e := range copies[1:] {
			if e != copies[0] {
				t.Errorf("seq %s/%d is on the topic twice with different content: %+v and %+v", id.ns, id.seq, copies[0], e)
			}
		}
		if j, ok := journal[id]; !ok || j.revision != copies[0] {
			t.Errorf("seq %s/%d on the topic is %+v; the new primary's journal has %+v", id.ns, id.seq, copies[0], j.revision)
		}
	}
	if published != len(journal) {
		t.Errorf("%d seqs on the topic, %d in the new primary's journal", published, len(journal))
	}
	// Every acknowledged write is in the journal, as acknowledged.
	reused := 0
	for _, w := range acked {
		j, ok := journal[seqID{w.ns, w.seq}]
		if !ok || j.key != w.key || j.version != w.version {
			t.Errorf("acknowledged write %s/%s (seq %d, version %d) is not in the new primary's journal: %+v", w.ns, w.key, w.seq, w.version, j)
		}
		if lost[seqID{w.ns, w.seq}] {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("no write on the new primary took a seq a timed-out write had on the old one: the test shows nothing")
	}

	// The example consumer, a fresh group from the start of the topic, ends equal to
	// the journal: one event per seq, each the journal's revision.
	lines := runConsumer(t, journal)
	if len(lines) != len(journal) {
		t.Errorf("the consumer handled %d events; the journal has %d revisions", len(lines), len(journal))
	}
	for id, j := range journal {
		if got, ok := lines[id]; !ok || got != j.line() {
			t.Errorf("consumer line for %s/%d: %q; want %q", id.ns, id.seq, got, j.line())
		}
	}
	t.Logf("%d writes acknowledged (%d before the cut, %d after the failover, %d of these at a seq a timed-out write had on the old primary); "+
		"%d timed out; %d seqs published; the consumer handled %d events, the new primary's journal holds %d revisions",
		len(acked), 8, 8, reused, len(timedOut), published, len(lines), len(journal))
}

type seqID struct {
	ns  string
	seq int64
}

// revision is what the topic and the journal both say about a seq.
type revision struct {
	eventType, memoryID, status, userRef string
	version                              int64
}

// journalRow is a revision of the journal and its key.
type journalRow struct {
	revision
	key string
}

// line is the example consumer's line for the revision (its plain fields).
func (r revision) line() string {
	return fmt.Sprintf("%s memory_id=%s version=%d status=%s tombstone=false user=ref:%s", r.eventType, r.memoryID, r.version, r.status, r.userRef[:12])
}

// seqsOnTopic reads every copy of every seq of the org on the topic.
func seqsOnTopic(t *testing.T) map[seqID][]revision {
	t.Helper()
	out := map[seqID][]revision{}
	for _, rec := range env.TopicRecords(t) {
		e, err := events.Decode(rec.Value)
		if err != nil {
			t.Fatalf("record at %d/%d: %v", rec.Partition, rec.Offset, err)
		}
		if e.Org != org || e.Revision == nil {
			continue
		}
		id := seqID{e.Namespace, e.Seq}
		out[id] = append(out[id], revision{eventType: string(e.Type), memoryID: e.Revision.MemoryID,
			status: e.Revision.Status, userRef: e.Revision.UserRef, version: e.Revision.Version})
	}
	return out
}

func readJournal(t *testing.T, pool *pgxpool.Pool, nss []string) map[seqID]journalRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT namespace, seq, event_type, loom.opened_row(row, sealed, org, namespace, seq)->>'memory_key', memory_id::text, status, user_id, version
		FROM loom.memory_revisions WHERE org = $1 AND namespace = ANY($2)`, org, nss)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[seqID]journalRow{}
	refs := map[string]string{}
	for rows.Next() {
		var id seqID
		var r journalRow
		var user string
		if err := rows.Scan(&id.ns, &id.seq, &r.eventType, &r.key, &r.memoryID, &r.status, &user, &r.version); err != nil {
			t.Fatal(err)
		}
		r.userRef = refs[user]
		if r.userRef == "" {
			r.userRef = testenv.UserRef(t, pool, org, user)
			refs[user] = r.userRef
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var consumerLine = regexp.MustCompile(`^` + org + `/(\S+)/(\d+) (\S+) committed_at=\S+ (.*)$`)

// runConsumer runs examples/consumer in a fresh group until it has handled every seq
// of journal, and returns its line per seq (without the id and commit time).
func runConsumer(t *testing.T, journal map[seqID]journalRow) map[seqID]string {
	t.Helper()
	bin := testenv.Build(t, "github.com/loomplane/loom/examples/consumer")
	cmd := exec.Command(bin, "--brokers", strings.Join(env.Stack.Kafka.Brokers(), ","), "--group", testenv.Unique(t, "group"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lines := map[seqID]string{}
	dup := []string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			m := consumerLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			seq, _ := strconv.ParseInt(m[2], 10, 64)
			id := seqID{m[1], seq}
			mu.Lock()
			if _, ok := lines[id]; ok {
				dup = append(dup, sc.Text())
			}
			lines[id] = m[3] + " " + m[4]
			mu.Unlock()
		}
	}()
	testenv.Eventually(t, 60*time.Second, "the consumer to handle every revision", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range journal {
			if _, ok := lines[id]; !ok {
				return false
			}
		}
		return true
	})
	cmd.Process.Kill()
	cmd.Wait()
	<-done
	if len(dup) > 0 {
		t.Errorf("the consumer handled seqs twice: %v\n%s", dup, stderr.String())
	}
	return lines
}
