package events

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTypes(t *testing.T) {
	revisions := []Type{TypeWritten, TypeRevised, TypeTombstoned, TypeRestored, TypeRedacted, TypeStatusChanged}
	for _, typ := range revisions {
		if !typ.Valid() || !typ.IsRevision() {
			t.Errorf("%s: Valid %v IsRevision %v", typ, typ.Valid(), typ.IsRevision())
		}
	}
	for _, typ := range []Type{TypeErased, TypeParked, TypeUsageRecorded} {
		if !typ.Valid() || typ.IsRevision() {
			t.Errorf("%s: Valid %v IsRevision %v", typ, typ.Valid(), typ.IsRevision())
		}
	}
	for _, typ := range []Type{"", "memory.deleted", "Memory.Written"} {
		if typ.Valid() || typ.IsRevision() {
			t.Errorf("%q is valid", typ)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	envelopes := []*Envelope{
		revisionEnvelope(t, TypeWritten, 1, false),
		revisionEnvelope(t, TypeRevised, 2, false),
		revisionEnvelope(t, TypeTombstoned, 3, true),
		revisionEnvelope(t, TypeRestored, 4, false),
		revisionEnvelope(t, TypeRedacted, 5, false),
		revisionEnvelope(t, TypeStatusChanged, 6, false),
		plainEnvelope(TypeErased, 7),
		plainEnvelope(TypeParked, 8),
		usageRecorded(9),
	}
	for _, want := range envelopes {
		t.Run(string(want.Type), func(t *testing.T) {
			b, err := Encode(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestEncodeWritesUTCAndLeavesInputAlone(t *testing.T) {
	e := revisionEnvelope(t, TypeWritten, 1, false)
	zone := time.FixedZone("UTC-5", -5*3600)
	e.CommittedAt = committedAt.In(zone)
	e.Revision.CreatedAt = e.Revision.CreatedAt.In(zone)
	e.Revision.UpdatedAt = e.Revision.UpdatedAt.In(zone)
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		CommittedAt string `json:"committed_at"`
		Revision    struct {
			CreatedAt string `json:"created_at"`
			UpdatedAt string `json:"updated_at"`
		} `json:"revision"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{m.CommittedAt, m.Revision.CreatedAt, m.Revision.UpdatedAt} {
		if !strings.HasSuffix(s, "Z") {
			t.Errorf("time %q is not UTC", s)
		}
	}
	if m.CommittedAt != "2026-03-14T09:26:53.589793238Z" {
		t.Errorf("committed_at %q", m.CommittedAt)
	}
	if e.CommittedAt.Location() != zone || e.Revision.CreatedAt.Location() != zone {
		t.Error("Encode changed the caller's envelope")
	}
}

func TestDecodeIgnoresUnknownFieldsAndNormalisesTimes(t *testing.T) {
	in := `{"envelope_version":1,"id":"acme/support/3","type":"memory.erased","org":"acme",
		"namespace":"support","seq":3,"committed_at":"2026-03-14T10:26:53+01:00",
		"added_in_v1_later":{"x":[1,2]}}`
	e, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC); e.CommittedAt != want {
		t.Fatalf("committed_at %v, want %v", e.CommittedAt, want)
	}
}

// invalidCase is an envelope made valid by base, then broken by mutate.
type invalidCase struct {
	name   string
	base   func(*testing.T) *Envelope
	mutate func(*Envelope)
}

func TestEncodeRejectsInvalid(t *testing.T) {
	rejectsInvalid(t, []invalidCase{
		{"version 0", validRevised, func(e *Envelope) { e.Version = 0 }},
		{"version 4", validRevised, func(e *Envelope) { e.Version = 4 }},
		{"version 1 without content_sha256", validRevised, func(e *Envelope) { e.Version = 1; e.Revision.UserRef = "" }},
		{"id of another seq", validRevised, func(e *Envelope) { e.ID = "acme/support/99" }},
		{"id of another namespace", validRevised, func(e *Envelope) { e.ID = "acme/sales/1" }},
		{"empty id", validRevised, func(e *Envelope) { e.ID = "" }},
		{"empty org", validRevised, func(e *Envelope) { e.Org = ""; e.ID = RecordID("", e.Namespace, e.Seq) }},
		{"empty namespace", validRevised, func(e *Envelope) { e.Namespace = ""; e.ID = RecordID(e.Org, "", e.Seq) }},
		{"org with slash", validRevised, func(e *Envelope) { e.Org = "a/b"; e.ID = RecordID(e.Org, e.Namespace, e.Seq) }},
		{"namespace with slash", validRevised, func(e *Envelope) { e.Namespace = "a/b"; e.ID = RecordID(e.Org, e.Namespace, e.Seq) }},
		{"seq 0", validRevised, func(e *Envelope) { e.Seq = 0; e.ID = RecordID(e.Org, e.Namespace, 0) }},
		{"seq negative", validRevised, func(e *Envelope) { e.Seq = -1; e.ID = RecordID(e.Org, e.Namespace, -1) }},
		{"empty type", validRevised, func(e *Envelope) { e.Type = "" }},
		{"unknown type", validRevised, func(e *Envelope) { e.Type = "memory.deleted" }},
		{"zero committed_at", validRevised, func(e *Envelope) { e.CommittedAt = time.Time{} }},
		{"revision type without revision", validRevised, func(e *Envelope) { e.Revision = nil }},
		{"revision type without sealed", validRevised, func(e *Envelope) { e.Sealed = nil }},
		{"erased with revision", validRevised, func(e *Envelope) { e.Type = TypeErased }},
		{"erasure on a revision", validRevised, func(e *Envelope) { e.Erasure = &Erasure{ID: "x", Scope: ErasureScopeNamespace, Generation: e.Seq} }},
		{"redaction on a parked record", validParked, func(e *Envelope) { e.Redaction = &Redaction{Versions: []int64{1}} }},
		{"redaction without versions", validRedacted, func(e *Envelope) { e.Redaction.Versions = nil }},
		{"erasure of another generation", validErased, func(e *Envelope) { e.Erasure.Generation = e.Seq + 1 }},
		{"erasure of an unknown scope", validErased, func(e *Envelope) { e.Erasure.Scope = "org" }},
		{"user erasure without user_ref", validErased, func(e *Envelope) { e.Erasure.UserRef = "" }},
		{"namespace erasure with user_ref", validErased, func(e *Envelope) { e.Erasure.Scope = ErasureScopeNamespace }},
		{"version 1 user erasure without user_id", validErased, func(e *Envelope) { e.Version = 1; e.Erasure.UserRef = "" }},
		{"parked with sealed only", validParked, func(e *Envelope) {
			e.Sealed = &Sealed{Alg: SealAlg, Nonce: make([]byte, 12), Ciphertext: make([]byte, 16)}
		}},
		{"usage_recorded without usage", validUsage, func(e *Envelope) { e.Usage = nil }},
		{"usage on a parked record", validParked, func(e *Envelope) { e.Usage = usageRecorded(e.Seq).Usage }},
		{"usage_recorded with a revision", validUsage, func(e *Envelope) { e.Revision = &Revision{Op: "memory.set"} }},
		{"usage with no item", validUsage, func(e *Envelope) { e.Usage.Items = nil }},
		{"usage counting a memory twice", validUsage, func(e *Envelope) { e.Usage.Items[1].MemoryID = e.Usage.Items[0].MemoryID }},
		{"usage item counting nothing", validUsage, func(e *Envelope) { e.Usage.Items[1] = UsageItem{MemoryID: "m"} }},
		{"usage item with a negative count", validUsage, func(e *Envelope) { e.Usage.Items[0].Recalls = -1 }},
		{"usage item without memory_id", validUsage, func(e *Envelope) { e.Usage.Items[0].MemoryID = "" }},
		{"usage past its bound", validUsage, func(e *Envelope) {
			e.Usage.Items = make([]UsageItem, MaxUsageItems+1)
			for i := range e.Usage.Items {
				e.Usage.Items[i] = UsageItem{MemoryID: strconv.Itoa(i), Touches: 1}
			}
		}},
		{"parked with revision only", validParked, func(e *Envelope) { e.Revision = &Revision{} }},
		{"v1 content_sha256 empty", validV1Revised, func(e *Envelope) { e.Revision.ContentSHA256 = "" }},
		{"v1 content_sha256 uppercase", validV1Revised, func(e *Envelope) { e.Revision.ContentSHA256 = strings.ToUpper(e.Revision.ContentSHA256) }},
		{"v1 content_sha256 short", validV1Revised, func(e *Envelope) { e.Revision.ContentSHA256 = e.Revision.ContentSHA256[:63] }},
		{"v1 content_sha256 not hex", validV1Revised, func(e *Envelope) { e.Revision.ContentSHA256 = strings.Repeat("g", 64) }},
		{"v1 with user_ref", validV1Revised, func(e *Envelope) { e.Revision.UserRef = strings.Repeat("a", 64) }},
		{"empty op", validRevised, func(e *Envelope) { e.Revision.Op = "" }},
		{"empty memory_id", validRevised, func(e *Envelope) { e.Revision.MemoryID = "" }},
		{"version equals prev_version", validRevised, func(e *Envelope) { e.Revision.Version = e.Revision.PrevVersion }},
		{"version below prev_version", validRevised, func(e *Envelope) { e.Revision.Version = e.Revision.PrevVersion - 1 }},
		{"negative prev_version", validRevised, func(e *Envelope) { e.Revision.PrevVersion = -1 }},
		{"negative reinforcement_count", validRevised, func(e *Envelope) { e.Revision.ReinforcementCount = -1 }},
		{"negative embedding_dim", validRevised, func(e *Envelope) { e.Revision.EmbeddingDim = -1 }},
		{"sealed wrong alg", validRevised, func(e *Envelope) { e.Sealed.Alg = "none" }},
		{"sealed short nonce", validRevised, func(e *Envelope) { e.Sealed.Nonce = e.Sealed.Nonce[:11] }},
		{"sealed ciphertext shorter than tag", validRevised, func(e *Envelope) { e.Sealed.Ciphertext = e.Sealed.Ciphertext[:15] }},
	})
	if _, err := Encode(nil); !errors.Is(err, ErrInvalidEnvelope) {
		t.Errorf("Encode(nil) = %v", err)
	}
}

// rejectsInvalid checks that Encode refuses each case, and Decode the JSON of it.
func rejectsInvalid(t *testing.T, cases []invalidCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.base(t)
			tc.mutate(e)
			if b, err := Encode(e); !errors.Is(err, ErrInvalidEnvelope) {
				t.Fatalf("Encode = %s, %v; want ErrInvalidEnvelope", b, err)
			}
			// Decode applies the same rules to what another producer might write.
			raw, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(raw); !errors.Is(err, ErrInvalidEnvelope) {
				t.Fatalf("Decode accepted %s: %v", raw, err)
			}
		})
	}
}

// The plain fields name a user, an agent and a session only by reference from version
// 2 (the user) and 3 (the writer) on, and a version names only what it has.
func TestEncodeRejectsClearIdentities(t *testing.T) {
	rejectsInvalid(t, []invalidCase{
		{"version 2 with user_id in the clear", validRevised, func(e *Envelope) { e.Revision.UserID = "u-42" }},
		{"version 2 with content_sha256 in the clear", validRevised, func(e *Envelope) { e.Revision.ContentSHA256 = strings.Repeat("a", 64) }},
		{"version 2 without user_ref", validRevised, func(e *Envelope) { e.Revision.UserRef = "" }},
		{"version 3 with the agent in the clear", validRevised, func(e *Envelope) { e.Revision.Agent = "triage-bot" }},
		{"version 3 with the session in the clear", validRevised, func(e *Envelope) { e.Revision.SessionID = "s-1" }},
		{"version 3 agent_ref not a reference", validRevised, func(e *Envelope) { e.Revision.AgentRef = "triage-bot" }},
		{"version 3 session_ref not a reference", validRevised, func(e *Envelope) { e.Revision.SessionRef = strings.Repeat("A", 64) }},
		{"version 2 with agent_ref", validV2Revised, func(e *Envelope) { e.Revision.AgentRef = strings.Repeat("a", 64) }},
		{"version 2 with session_ref", validV2Revised, func(e *Envelope) { e.Revision.SessionRef = "-" }},
		{"version 3 turns with the agent in the clear", validTurns, func(e *Envelope) { e.Turns.Agent = "triage-bot" }},
		{"version 3 turns with the session in the clear", validTurns, func(e *Envelope) { e.Turns.SessionID = "s-1" }},
		{"version 2 turns with session_ref", validTurns, func(e *Envelope) {
			e.Version, e.Turns.AgentRef, e.Turns.Agent, e.Turns.SessionID = 2, "", "triage-bot", "s-1"
		}},
		{"user_ref not hex", validRevised, func(e *Envelope) { e.Revision.UserRef = strings.Repeat("g", 64) }},
		{"version 2 erasure with user_id in the clear", validErased, func(e *Envelope) { e.Erasure.UserID = "u-42" }},
	})
}

func TestDecodeRejectsMalformedJSON(t *testing.T) {
	for _, in := range []string{
		``,
		`null`,
		`[]`,
		`{"envelope_version":1`,
		`{"envelope_version":"1","id":"a/b/1","type":"loom.parked","org":"a","namespace":"b","seq":1,"committed_at":"2026-01-01T00:00:00Z"}`,
		`{"envelope_version":1,"id":"a/b/1","type":"loom.parked","org":"a","namespace":"b","seq":1.5,"committed_at":"2026-01-01T00:00:00Z"}`,
		`{"envelope_version":1,"id":"a/b/1","type":"loom.parked","org":"a","namespace":"b","seq":1,"committed_at":"yesterday"}`,
		`{"envelope_version":1,"id":"a/b/1","type":"loom.parked","org":"a","namespace":"b","seq":1,"committed_at":"2026-01-01T00:00:00Z"} {}`,
	} {
		if e, err := Decode([]byte(in)); !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("Decode(%s) = %+v, %v; want ErrInvalidEnvelope", in, e, err)
		}
	}
}

func validRevised(t *testing.T) *Envelope  { return revisionEnvelope(t, TypeRevised, 1, false) }
func validParked(_ *testing.T) *Envelope   { return plainEnvelope(TypeParked, 1) }
func validErased(_ *testing.T) *Envelope   { return plainEnvelope(TypeErased, 1) }
func validRedacted(t *testing.T) *Envelope { return revisionEnvelope(t, TypeRedacted, 1, true) }
func validUsage(_ *testing.T) *Envelope    { return usageRecorded(1) }

// validV1Revised is a revision as Loom wrote it before envelope version 2: the user id
// and the content digest in the clear, the agent and the session too.
func validV1Revised(t *testing.T) *Envelope {
	e := validV2Revised(t)
	e.Version, e.Revision.UserRef = 1, ""
	e.Revision.UserID, e.Revision.ContentSHA256 = "u-42", strings.Repeat("0a", 32)
	return e
}

// validV2Revised is a revision as Loom wrote it before envelope version 3: the agent
// and the session id in the clear.
func validV2Revised(t *testing.T) *Envelope {
	e := revisionEnvelope(t, TypeRevised, 1, false)
	e.Version = 2
	e.Revision.AgentRef, e.Revision.SessionRef = "", ""
	e.Revision.Agent, e.Revision.SessionID = "triage-bot", "s-1"
	return e
}

// Records written before version 2 stay readable: the topic is kept for ever.
func TestDecodeReadsVersion1(t *testing.T) {
	in := `{"envelope_version":1,"id":"acme/support/3","type":"memory.erased","org":"acme",
		"namespace":"support","seq":3,"committed_at":"2026-03-14T09:26:53Z",
		"erasure":{"id":"e1","scope":"user","user_id":"u-42","purge":false,"generation":3,"withdrawn":0}}`
	e, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if e.Version != 1 || e.Erasure.UserID != "u-42" {
		t.Fatalf("decoded %+v", e.Erasure)
	}
	b, err := Encode(validV1Revised(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatalf("a version 1 revision does not decode: %v", err)
	}
}

// Version 2 carries neither the user id nor the content digest in the clear: both are
// sealed, and Opened fills them in for a follower that opened the content.
func TestVersion2SealsTheUserAndTheDigest(t *testing.T) {
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	e := revisionEnvelope(t, TypeWritten, 1, false)
	e.Sealed, err = Seal(key, e.ID, &Content{MemoryKey: "k", Value: json.RawMessage(`"v"`), UserID: "u-42",
		ContentSHA256: strings.Repeat("0b", 32)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{`"u-42"`, `"user_id"`, `"content_sha256"`} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the record's plain JSON holds %s: %s", leak, b)
		}
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(key, got.ID, got.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	Opened(got.Revision, c)
	if got.Revision.UserID != "u-42" || got.Revision.ContentSHA256 != strings.Repeat("0b", 32) {
		t.Fatalf("opened revision: user %q, sha %q", got.Revision.UserID, got.Revision.ContentSHA256)
	}
	if got.Revision.UserRef != testUserRef(t, "u-42") {
		t.Fatal("user_ref changed")
	}
	other, _ := UserRef([]byte("another org's key, 32 bytes long"), "u-42")
	if other == got.Revision.UserRef {
		t.Fatal("the same user under another key has the same user_ref")
	}
}

// Version 3 carries neither the agent nor the session id in the clear: a revision's are
// sealed in its content, a turns record's in each turn's text, and the plain fields
// name them by reference. Opened (OpenedTurns) fills them in for a follower that
// opened the content; a version 2 record, which carries them in the clear, reads the
// same after it.
func TestVersion3SealsTheWriter(t *testing.T) {
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	rev := revisionEnvelope(t, TypeWritten, 1, false)
	rev.Revision.Actor = "token:t1"
	rev.Sealed, err = Seal(key, rev.ID, &Content{MemoryKey: "k", Value: json.RawMessage(`"v"`), UserID: "u-42", Agent: "triage-bot", SessionID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	turnKeys := [][]byte{key, key}
	for _, e := range []*Envelope{rev, turnsEnvelope(t, 2, turnKeys)} {
		b, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{"triage-bot", `"s-1"`, `"agent":`, `"session_id":`} {
			if strings.Contains(string(b), leak) {
				t.Errorf("the %s record's plain JSON holds %s: %s", e.Type, leak, b)
			}
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		var agent, session, agentRef, sessionRef string
		if got.Revision != nil {
			c, err := Open(key, got.ID, got.Sealed)
			if err != nil {
				t.Fatal(err)
			}
			Opened(got.Revision, c)
			agent, session, agentRef, sessionRef = got.Revision.Agent, got.Revision.SessionID, got.Revision.AgentRef, got.Revision.SessionRef
		} else {
			it := got.Turns.Items[1]
			text, err := OpenTurn(key, got.ID, it.TurnID, it.Sealed)
			if err != nil {
				t.Fatal(err)
			}
			OpenedTurns(got.Turns, text)
			agent, session, agentRef, sessionRef = got.Turns.Agent, got.Turns.SessionID, got.Turns.AgentRef, got.Turns.SessionRef
		}
		if agent != "triage-bot" || session != "s-1" {
			t.Errorf("the opened %s record names agent %q, session %q", e.Type, agent, session)
		}
		if agentRef != testAgentRef(t, "triage-bot") || sessionRef != testSessionRef(t, "s-1") {
			t.Errorf("the %s record's references changed: %q, %q", e.Type, agentRef, sessionRef)
		}
	}
	if ref, _ := AgentRef(testUserRefKey, "-"); ref != "-" {
		t.Errorf("the default agent's reference is %q, want it as it is", ref)
	}
}

// Records written before version 3 stay readable, and a follower reads them in the
// shape Opened gives a version 3 record: the clear agent and session are kept, not
// replaced by the content's (which holds none).
func TestDecodeReadsVersion2(t *testing.T) {
	key, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	e := validV2Revised(t)
	e.Sealed, err = Seal(key, e.ID, &Content{MemoryKey: "k", Value: json.RawMessage(`"v"`), UserID: "u-42"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("a version 2 revision does not decode: %v", err)
	}
	c, err := Open(key, got.ID, got.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	Opened(got.Revision, c)
	if got.Version != 2 || got.Revision.Agent != "triage-bot" || got.Revision.SessionID != "s-1" || got.Revision.UserID != "u-42" {
		t.Fatalf("the opened version 2 revision: %+v", got.Revision)
	}
	in := `{"envelope_version":2,"id":"acme/support/3","type":"memory.turns_observed","org":"acme","namespace":"support","seq":3,
		"committed_at":"2026-03-14T09:26:53Z","turns":{"agent":"triage-bot","user_ref":"` + testUserRef(t, "u-42") + `","session_id":"s-1",
		"source":"observe","items":[{"turn_id":"t1","role":"user","message_index":0,"occurred_at":"2026-03-14T09:26:53Z",
		"sealed":{"alg":"A256GCM","nonce":"AAAAAAAAAAAAAAAA","ciphertext":"AAAAAAAAAAAAAAAAAAAAAA=="}}]}}`
	turns, err := Decode([]byte(in))
	if err != nil {
		t.Fatalf("a version 2 turns record does not decode: %v", err)
	}
	OpenedTurns(turns.Turns, &TurnText{Text: "x"})
	if turns.Turns.Agent != "triage-bot" || turns.Turns.SessionID != "s-1" {
		t.Fatalf("the version 2 turns record: %+v", turns.Turns)
	}
}
