package command

import (
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

func rowOf(key, text string) *memrow.Row {
	v := []byte(`"` + text + `"`)
	return &memrow.Row{Identity: memrow.Identity{MemoryKey: key}, MemoryID: "id-" + key, MemoryType: "fact",
		Status: memrow.StatusActive, Value: v, ContentSHA256: memrow.ContentSHA256(v)}
}

func TestDecideFollowsTheSeedOrder(t *testing.T) {
	lisbon := rowOf("home", "the user lives in Lisbon")
	newRow := rowOf("new", "the user lives in Berlin")
	pinned := rowOf("pinned", "the user lives in Berlin now")
	pinned.Pinned = true
	same := rowOf("same", "the user lives in Berlin")
	dup := rowOf("dup", "the user lives in Berlin Germany")
	future := rowOf("future", "the user lives in Madrid")
	later := time.Now().Add(24 * time.Hour)
	future.ValidAt = &later
	in := func(policy string, peers ...peer) verdictInput {
		return verdictInput{row: newRow, valueText: "the user lives in Berlin", policy: policy, threshold: 0.8,
			duplicateThreshold: 0.9, peers: peers}
	}
	cases := []struct {
		name   string
		in     verdictInput
		kind   Verdict
		target string
	}{
		{"no peer", in(PolicyAutoReinforce), VerdictNew, ""},
		{"a peer below the threshold is judged, not acted on", in(PolicyAutoReinforce, peer{row: lisbon, cosine: 0.5}), VerdictNew, ""},
		{"same canonical value merges, whatever its cosine", in(PolicyAutoReinforce, peer{row: lisbon, cosine: 0.95}, peer{row: same, cosine: 0.7}), VerdictMerge, "same"},
		{"merge comes before a pin", in(PolicyAutoReinforce, peer{row: pinned, cosine: 0.99}, peer{row: same, cosine: 1}), VerdictMerge, "same"},
		{"a close pinned peer refuses", in(PolicyAutoReinforce, peer{row: pinned, cosine: 0.95}), VerdictPinned, "pinned"},
		{"newest_wins: another object refines", in(PolicyNewestWins, peer{row: lisbon, cosine: 0.85}), VerdictRefines, "home"},
		{"newest_wins: a peer dated later conflicts instead", in(PolicyNewestWins, peer{row: future, cosine: 0.85}), VerdictConflict, ""},
		{"auto_reinforce: another object conflicts", in(PolicyAutoReinforce, peer{row: lisbon, cosine: 0.85}), VerdictConflict, ""},
		{"near-identical statement is a duplicate", in(PolicyAutoReinforce, peer{row: dup, cosine: 0.95}), VerdictDuplicate, "dup"},
		{"near-identical but below the duplicate threshold conflicts", in(PolicyAutoReinforce, peer{row: dup, cosine: 0.85}), VerdictConflict, ""},
		{"append_only judges nothing", in(PolicyAppendOnly, peer{row: pinned, cosine: 0.99}), VerdictNew, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := decide(tc.in)
			if v.kind != tc.kind {
				t.Fatalf("verdict %s, want %s", v.kind, tc.kind)
			}
			if tc.target != "" && (v.target == nil || v.target.MemoryKey != tc.target) {
				t.Fatalf("acted on %+v, want %s", v.target, tc.target)
			}
			if tc.kind == VerdictConflict && len(v.conflicts) == 0 {
				t.Fatal("a conflict names no peer")
			}
			if tc.in.policy != PolicyAppendOnly && len(v.judged) != len(tc.in.peers) {
				t.Fatalf("judged %d of %d peers", len(v.judged), len(tc.in.peers))
			}
		})
	}
}

// A verdict relates statements of one subject's fact (the same user_id; for the
// anonymous user the same agent too): bob's "blue" is not merged into alice's row,
// duplicates, refines or conflicts with nothing of hers, and is written as new. Only a
// pin on another value protects her fact from his write.
func TestVerdictsJudgeOneSubjectsFacts(t *testing.T) {
	of := func(key, text, agent, user string) *memrow.Row {
		r := rowOf(key, text)
		r.Agent, r.UserID = agent, user
		return r
	}
	bob := of("bob-favorite-color", "blue", "-", "bob")
	for _, c := range []struct {
		name  string
		row   *memrow.Row
		peer  *memrow.Row
		pin   bool
		kind  Verdict
		label Verdict
	}{
		{"another user's same value is no merge", bob, of("alice-favorite-color", "blue", "-", "alice"), false, VerdictNew, VerdictOtherSubject},
		{"the same user's same value merges", bob, of("bob-color", "blue", "-", "bob"), false, VerdictMerge, VerdictMerge},
		{"another user's close value is no conflict", bob, of("alice-color", "navy blue", "-", "alice"), false, VerdictNew, VerdictOtherSubject},
		{"another user's pinned same value refuses nothing", bob, of("alice-favorite-color", "blue", "-", "alice"), true, VerdictNew, VerdictOtherSubject},
		{"another user's pinned other value still refuses", bob, of("alice-color", "navy blue", "-", "alice"), true, VerdictPinned, VerdictPinned},
		{"the anonymous user: another agent is another subject", of("k1", "blue", "planner", "-"), of("k2", "blue", "coder", "-"), false, VerdictNew, VerdictOtherSubject},
		{"the anonymous user: the same agent merges", of("k1", "blue", "planner", "-"), of("k2", "blue", "planner", "-"), false, VerdictMerge, VerdictMerge},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.peer.Pinned = c.pin
			v := decide(verdictInput{row: c.row, valueText: memrow.ValueText(c.row.Value), policy: PolicyAutoReinforce, threshold: 0.8,
				duplicateThreshold: 0.9, peers: []peer{{row: c.peer, cosine: 0.95}}})
			if v.kind != c.kind || len(v.judged) != 1 || v.judged[0].Verdict != c.label {
				t.Fatalf("verdict %s, peer judged %+v: want %s, peer %s", v.kind, v.judged, c.kind, c.label)
			}
		})
	}
}

func TestDecisionsAreIdentifiedByKey(t *testing.T) {
	row := rowOf("db-choice", "we use postgres")
	row.MemoryType = "decision"
	pinned := rowOf("other", "we use postgres")
	pinned.MemoryType, pinned.Pinned = "decision", true
	v := decide(verdictInput{row: row, valueText: "we use postgres", policy: PolicyAutoReinforce, threshold: 0.8,
		duplicateThreshold: 0.9, peers: []peer{{row: pinned, cosine: 1}}})
	if v.kind != VerdictConflict {
		t.Fatalf("a decision under another key with the same value: %s, want conflict (no merge, no pinned refusal)", v.kind)
	}
}

func TestTextRules(t *testing.T) {
	if !sameContentWords("the user prefers dark mode", "user prefers dark mode") {
		t.Error("stopwords made two statements differ")
	}
	if sameContentWords("the user prefers dark mode", "the user prefers light mode") {
		t.Error("different words counted as the same")
	}
	if !valuesDiffer("invoice 42 due on the 3rd", "invoice 42 due on the 5th") || valuesDiffer("due 2026-05-01", "due 2026-05-01 at noon") {
		t.Error("valuesDiffer")
	}
}

func TestDetectSensitive(t *testing.T) {
	for text, kind := range map[string]string{
		"my key is AKIAIOSFODNN7EXAMPLE":                   "aws_access_key",
		"contact me at jane.doe@example.com":               "email",
		"card 4111 1111 1111 1111 expires soon":            "card_number",
		"password: hunter2secret":                          "credential",
		"token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB": "github_token",
		"IBAN GB82 WEST 1234 5698 7654 32":                 "iban",
		"call +44 20 7946 0958 tomorrow":                   "phone",
		"-----BEGIN RSA PRIVATE KEY-----\nMIIEow":          "private_key",
	} {
		got := detectSensitive(text)
		if len(got) == 0 || got[0] != kind {
			t.Errorf("%q: detected %v, want %s", text, got, kind)
		}
	}
	for _, text := range []string{"the user prefers dark mode", "order 1234 5678 9012 3456 shipped", "version 1.2.3 on 2026-05-01"} {
		if got := detectSensitive(text); len(got) != 0 {
			t.Errorf("%q flagged as %v", text, got)
		}
	}
}

func TestResolveExpiryTakesTheEarliest(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := 3600
	validTo := now.Add(30 * time.Minute)
	e := resolveExpiry(expiryInput{now: now, ttlSeconds: &ttl, validTo: &validTo,
		typeConfig: TypeConfig{RetentionDays: 1, OnExpire: ExpireDemote}, namespace: NamespaceConfig{RetentionDays: 7}})
	if e.at == nil || !e.at.Equal(validTo) || e.onExpire != ExpireDemote {
		t.Fatalf("expiry %+v, want valid_to with the type's action", e)
	}
	e = resolveExpiry(expiryInput{now: now, namespace: NamespaceConfig{RetentionDays: 7}, high: true, sensitiveRetention: 24 * time.Hour})
	if e.at == nil || !e.at.Equal(now.Add(24*time.Hour)) || e.onExpire != ExpireTombstone {
		t.Fatalf("high row: %+v, want the sensitive retention", e)
	}
	if e := resolveExpiry(expiryInput{now: now}); e.at != nil || e.onExpire != "" {
		t.Fatalf("no expiry asked: %+v", e)
	}
}

func TestNamespaceConfigValidate(t *testing.T) {
	bad := []NamespaceConfig{
		{ConflictPolicy: "yolo"},
		{ConflictThreshold: ptr(1.5)},
		{RetentionDays: -1},
		{OnExpire: "explode"},
		{Types: map[string]TypeConfig{"fact": {Retype: "note"}, "note": {Retype: "memo"}}},
		{Types: map[string]TypeConfig{"bad/type": {}}},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %d accepted: %+v", i, c)
		}
	}
	good := NamespaceConfig{Types: map[string]TypeConfig{"note": {Retype: "fact", DedupThreshold: ptr(0.9), CharLimit: 100}}}
	if err := good.Validate(); err != nil || good.ConflictPolicy != PolicyAutoReinforce {
		t.Fatalf("good config: %v %+v", err, good)
	}
}

func TestSplitMethod(t *testing.T) {
	key, m, err := splitMethod("a%3Ab:pin")
	if err != nil || key != "a:b" || m != "pin" {
		t.Fatalf("split: %q %q %v", key, m, err)
	}
	if _, _, err := splitMethod("plain-key"); err == nil {
		t.Fatal("a POST without a method must be refused")
	}
}

func ptr[T any](v T) *T { return &v }
