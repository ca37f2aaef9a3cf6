package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
)

// The date anchor pool: "what did I do last Tuesday?" shares no word with the rows
// that answer it, and forty rows closer in wording fill every leg's pool, so no leg
// finds them; the pool reads the heads said that Tuesday, or said soon after and
// stating it ("yesterday"), and adds them, each with a date score of 1 and every leg's
// 0. Asked in a search scoped to the session with no reference_time, "last Tuesday" is
// read against the session's date (its newest turn), not the server's clock: on the
// server's clock it is a Tuesday of another year and the pool adds nothing.
func TestSearchAnchorPoolAddsRowsSaidOnTheAskedDay(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	const session = "trip-2023"
	id := client.Identity{SessionID: session}
	tuesday := time.Date(2023, 5, 9, 15, 0, 0, 0, time.UTC) // the session's last Tuesday
	entries := []client.BulkEntry{
		{Key: "turn.greenhouse", Value: "Repaired the greenhouse roof with Malik", Identity: id, ValidAt: tuesday},
		{Key: "turn.bike", Value: "Fixed the bike chain yesterday, finally", Identity: id, ValidAt: tuesday.AddDate(0, 0, 1)},
		// The session's newest turn: Thursday 11 May 2023.
		{Key: "turn.last", Value: "Heading to the airport soon", Identity: id, ValidAt: tuesday.AddDate(0, 0, 2)},
	}
	for i := range 40 {
		entries = append(entries, client.BulkEntry{Key: fmt.Sprintf("turn.habit%02d", i), Identity: id,
			Value:   fmt.Sprintf("what I do on a free day, idea %d: what did we do before, I do like to do lists", i),
			ValidAt: tuesday.AddDate(0, -1, -i%20)})
	}
	if _, err := e.c.Typed(t).BulkSet(context.Background(), e.ns, client.BulkSetRequest{Entries: entries}); err != nil {
		t.Fatalf("bulk_set: %v", err)
	}
	// top_k 3 and pool 10: each leg ranks 30 rows, all of them habits.
	ask := client.SearchRequest{TopK: 3, Pool: 10, SessionID: session}
	a := e.search(e.c, "what did I do last Tuesday?", ask)
	if x := a.Explain.Anchor; x.Status != "ran" || len(x.Spans) != 1 || !x.Spans[0].From.Equal(time.Date(2023, 5, 9, 0, 0, 0, 0, time.UTC)) || x.Added < 2 {
		t.Fatalf("the anchor pool in a session of May 2023: %+v, want it ran over 9 May 2023 and added both Tuesday rows", x)
	}
	got := answerKeys(a)
	for _, want := range []string{"turn.greenhouse", "turn.bike"} {
		i := slices.Index(got, want)
		if i < 0 {
			t.Fatalf("last Tuesday in the session: served %v, want %s", got, want)
		}
		s := a.Hits[i].Scores
		if s.Date == nil || *s.Date != 1 || s.Vector != 0 || s.Lexical != 0 || s.Key != 0 {
			t.Errorf("%s: scores %+v, want date 1 and no leg's score (only the pool found it)", want, s)
		}
	}
	if slices.Contains(got, "turn.last") {
		t.Errorf("served %v: turn.last was said on Thursday", got)
	}
	// anchor_pool false turns the pool off: the legs alone miss the Tuesday rows.
	off := ask
	off.AnchorPool = new(bool)
	if a := e.search(e.c, "what did I do last Tuesday?", off); a.Explain.Anchor.Status != "off" || slices.Contains(answerKeys(a), "turn.greenhouse") {
		t.Errorf("anchor_pool false: anchor %+v, served %v; want the pool off and no Tuesday row", a.Explain.Anchor, answerKeys(a))
	}

	// On the server's clock, last Tuesday is in another year: nothing of the session's.
	ask.SessionID = ""
	plain := e.search(e.c, "what did I do last Tuesday?", ask)
	if plain.Explain.Anchor.Added != 0 || slices.Contains(answerKeys(plain), "turn.greenhouse") {
		t.Errorf("on the server's clock: anchor %+v, served %v; want nothing added", plain.Explain.Anchor, answerKeys(plain))
	}
	// A reference_time outranks the session's date.
	ask.SessionID, ask.ReferenceTime = session, tuesday.AddDate(0, 0, 8) // Wednesday 17 May: last Tuesday is the 16th
	later := e.search(e.c, "what did I do last Tuesday?", ask)
	if later.Explain.Anchor.Added != 0 {
		t.Errorf("asked on 17 May: anchor %+v, served %v; want nothing said on 16 May", later.Explain.Anchor, answerKeys(later))
	}
	// A span as wide as a year reads no pool: the date alone does not say which row.
	if wide := e.search(e.c, "what did I do in 2023?", client.SearchRequest{TopK: 3}); wide.Explain.Anchor.Status != "off" {
		t.Errorf("a year: anchor %+v, want off", wide.Explain.Anchor)
	}
}
