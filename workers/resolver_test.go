package workers

import (
	"testing"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/memrow"
)

var defaultThresholds = thresholds{retire: 0.98, flag: 0.95, clear: 0.90}

func TestFoldActsOnlyAtItsThresholds(t *testing.T) {
	upd := func(conf float64) *peerJudgement {
		return &peerJudgement{Verdict: verdictUpdate, SameEntity: true, SameAttribute: true, Confidence: conf}
	}
	verdict := func(v judgeVerdict, conf float64) *peerJudgement {
		return &peerJudgement{Verdict: v, SameEntity: true, SameAttribute: true, Confidence: conf}
	}
	first := pairFacts{policy: command.PolicyAutoReinforce, peerFirst: true}
	for _, tc := range []struct {
		name  string
		j     *peerJudgement
		facts pairFacts
		want  pairAction
	}{
		{"left out of the answer", nil, first, actNone},
		{"an update at the retire threshold retires the older peer", upd(0.98), first, actRetire},
		{"newest_wins retires too", upd(0.99), pairFacts{policy: command.PolicyNewestWins, peerFirst: true}, actRetire},
		{"manual_review only flags", upd(0.99), pairFacts{policy: command.PolicyManualReview, peerFirst: true}, actFlag},
		{"an update just below retire flags", upd(0.979), first, actFlag},
		{"an update below flag does nothing", upd(0.949), first, actNone},
		{"a peer asserted later is flagged, never retired", upd(0.99), pairFacts{policy: command.PolicyAutoReinforce}, actFlag},
		{"both dated the same day: review", upd(0.99), pairFacts{policy: command.PolicyAutoReinforce, peerFirst: true, sameValidDay: true}, actFlag},
		{"a contradiction flags at 0.95", verdict(verdictContradiction, 0.95), first, actFlag},
		{"a contradiction below does nothing", verdict(verdictContradiction, 0.94), first, actNone},
		{"an update of another entity contradicts itself", &peerJudgement{Verdict: verdictUpdate, SameAttribute: true, Confidence: 0.99}, first, actNone},
		{"another attribute too", &peerJudgement{Verdict: verdictContradiction, SameEntity: true, Confidence: 0.99}, first, actNone},
		{"the anonymous user's other session: nothing", upd(0.99), pairFacts{policy: command.PolicyAutoReinforce, peerFirst: true, anonymous: true, otherSession: true}, actNone},
		{"the anonymous user's own session: retires", upd(0.99), pairFacts{policy: command.PolicyAutoReinforce, peerFirst: true, anonymous: true}, actRetire},
		{"a restatement clears a flag at 0.90", verdict(verdictRestatement, 0.90), pairFacts{policy: command.PolicyAutoReinforce, flagged: true}, actClear},
		{"unrelated clears a flag", verdict(verdictUnrelated, 0.97), pairFacts{policy: command.PolicyManualReview, flagged: true}, actClear},
		{"below clear leaves the flag", verdict(verdictElaboration, 0.89), pairFacts{policy: command.PolicyAutoReinforce, flagged: true}, actNone},
		{"no flag, nothing to clear", verdict(verdictRelated, 0.99), first, actNone},
	} {
		if got := fold(tc.j, tc.facts, defaultThresholds); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestAnswersNameTheirPeersEveryWay(t *testing.T) {
	peers := []clusterPeer{
		{row: &memrow.Row{MemoryID: "11111111-1111-1111-1111-111111111111", Identity: memrow.Identity{MemoryKey: "home"}}},
		{row: &memrow.Row{MemoryID: "22222222-2222-2222-2222-222222222222", Identity: memrow.Identity{MemoryKey: "city"}}},
		{row: &memrow.Row{MemoryID: "33333333-3333-3333-3333-333333333333", Identity: memrow.Identity{MemoryKey: "city"}}},
	}
	entry := func(peer string) string {
		return `{"peer": "` + peer + `", "reason": "r", "same_entity": true, "same_attribute": true, "verdict": "update", "confidence": 0.99}`
	}
	got := parseJudgements(`{"judgements": [`+entry("[p2]")+`, `+entry("key home")+`, `+entry("33333333-3333-3333-3333-333333333333")+`]}`, peers)
	if len(got) != 3 {
		t.Fatalf("p2, key home and an id name three peers: %v", got)
	}
	for _, bad := range []string{
		entry("p4"),       // no such peer
		entry("key city"), // two peers share the key
		entry("p1") + `, ` + `{"peer": "p2", "reason": "r", "same_entity": true, "same_attribute": true, "verdict": "update", "confidence": "high"}`,
		`{"peer": "p3", "reason": "r", "same_entity": true, "verdict": "update", "confidence": 0.99}`, // a field missing
		`{"peer": "p3", "reason": "r", "same_entity": true, "same_attribute": true, "verdict": "replaces", "confidence": 0.99}`,
		`{"peer": "p3", "reason": "r", "same_entity": true, "same_attribute": true, "verdict": "update", "confidence": 1.5}`,
	} {
		got := parseJudgements(`{"judgements": [`+bad+`]}`, peers)
		for i := range got {
			if i != 0 {
				t.Errorf("%s: resolved peer %d", bad, i+1)
			}
		}
	}
	if got := parseJudgements(`not json`, peers); len(got) != 0 {
		t.Errorf("a malformed answer resolves nothing: %v", got)
	}
}

func TestActionsWriteOnlyWhatChanges(t *testing.T) {
	j := &memrow.Row{MemoryID: "j", Status: memrow.StatusConflicted, ConflictWith: []string{"p"}, JudgementOwed: true, Version: 5}
	p := &memrow.Row{MemoryID: "p", Status: memrow.StatusConflicted, ConflictWith: []string{"j"}, Version: 3,
		Identity: memrow.Identity{MemoryKey: "pk"}}
	rows := pairRows(actRetire, j, p)
	if len(rows) != 2 || rows[0].Row.Status != memrow.StatusActive || len(rows[0].Row.ConflictWith) != 0 || rows[0].Row.JudgementOwed ||
		rows[1].Row.Status != memrow.StatusSuperseded || rows[1].Row.SupersededBy != "j" || rows[1].Op != opAutoSupersede ||
		rows[0].ReadVersion != 5 || rows[1].ReadVersion != 3 {
		t.Fatalf("a retirement supersedes the peer behind the winner and clears the winner's flag: %+v %+v", rows[0].Row, rows[1].Row)
	}
	if j.Status != memrow.StatusConflicted || p.Status != memrow.StatusConflicted {
		t.Fatal("the heads read are not changed in place")
	}
	if rows := pairRows(actFlag, j, p); len(rows) != 0 {
		t.Fatalf("flagging a flagged pair again writes nothing: %+v", rows)
	}
	if rows := pairRows(actClear, j, p); len(rows) != 2 || rows[0].Row.Status != memrow.StatusActive || rows[1].Row.Status != memrow.StatusActive {
		t.Fatalf("a clear leaves both rows without flags active: %+v", rows)
	}
	clean := &memrow.Row{MemoryID: "j", Status: memrow.StatusActive, JudgementOwed: true}
	other := &memrow.Row{MemoryID: "p", Status: memrow.StatusActive}
	if rows := pairRows(actClear, clean, other); len(rows) != 0 {
		t.Fatalf("a clear with no flag writes nothing, not even the mark: %+v", rows)
	}
}

func TestExtractionsKeepValidNamesOnce(t *testing.T) {
	var ex entityAnswer
	ex.Entities = append(ex.Entities,
		struct {
			Name    string   `json:"name"`
			Type    string   `json:"type"`
			Aliases []string `json:"aliases"`
		}{Name: "New York City", Type: "place", Aliases: []string{"NYC", "nyc", " New  York "}},
		struct {
			Name    string   `json:"name"`
			Type    string   `json:"type"`
			Aliases []string `json:"aliases"`
		}{Name: "new york city", Type: "city"},
		struct {
			Name    string   `json:"name"`
			Type    string   `json:"type"`
			Aliases []string `json:"aliases"`
		}{Name: "   "})
	got := cleanExtraction(ex, 16)
	if len(got.entities) != 1 || got.entities[0].name != "New York City" {
		t.Fatalf("one entity per canonical name, blank names dropped: %+v", got.entities)
	}
	if sp := got.entities[0].spellings; len(sp) != 3 || sp[0] != "new york city" || sp[1] != "nyc" || sp[2] != "new york" {
		t.Fatalf("spellings, canonical and once each: %v", sp)
	}
}
