package mem0

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func filterOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFiltersMatchAsMem0ReadsThem(t *testing.T) {
	alice, helper := "alice", "helper"
	r := record{UserID: &alice, AgentID: &helper, Categories: []string{"home", "travel"},
		Metadata:  map[string]any{"topic": "home", "rank": 2.0},
		CreatedAt: time.Date(2024, 7, 31, 18, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2024, 8, 2, 0, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`{"user_id": "alice"}`, true},
		{`{"user_id": "bob"}`, false},
		{`{"user_id": "*"}`, true},
		{`{"run_id": "*"}`, false},
		{`{"AND": [{"user_id": "alice"}, {"agent_id": "helper"}]}`, true},
		{`{"OR": [{"user_id": "bob"}, {"agent_id": "helper"}]}`, true},
		{`{"OR": [{"user_id": "bob"}, {"agent_id": "other"}]}`, false},
		{`{"NOT": [{"user_id": "bob"}]}`, true},
		{`{"user_id": {"in": ["bob", "alice"]}}`, true},
		{`{"user_id": {"ne": "alice"}}`, false},
		{`{"created_at": {"gte": "2024-07-01", "lte": "2024-07-31"}}`, true}, // lte a date holds all of it
		{`{"created_at": {"gt": "2024-07-31"}}`, false},
		{`{"created_at": {"lt": "2024-07-31T12:00:00Z"}}`, false},
		{`{"updated_at": {"gte": "2024-08-01T00:00:00Z"}}`, true},
		{`{"categories": {"in": ["travel"]}}`, true},
		{`{"categories": {"contains": "HOME"}}`, false},
		{`{"categories": {"icontains": "HOME"}}`, true},
		{`{"metadata": {"topic": "home"}}`, true},
		{`{"metadata": {"topic": "food"}}`, false},
		{`{"metadata": {"rank": {"gte": 2}}}`, true},
		{`{"metadata": {"rank": 3}}`, false},
	} {
		p, err := compile(filterOf(t, tc.filter))
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := p.check.match(&r); got != tc.want {
			t.Errorf("%s matched %v, want %v", tc.filter, got, tc.want)
		}
	}
}

func TestFiltersPushDownTheEntityEqualitiesEveryMatchHolds(t *testing.T) {
	p, err := compile(filterOf(t, `{"AND": [{"user_id": "alice"}, {"created_at": {"gte": "2024-01-01"}}], "app_id": "support",
		"OR": [{"agent_id": "a"}, {"agent_id": "b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != "alice" || p.AppID != "support" || p.AgentID != "" {
		t.Errorf("pushed down %+v: want user alice and app support, and no agent (it is under OR)", p.entities)
	}
	if !p.narrowsBeyondIdentity() {
		t.Error("a date range and an OR are checked after Loom's answer")
	}
	if p, _ := compile(filterOf(t, `{"user_id": "alice", "run_id": "r1"}`)); p.narrowsBeyondIdentity() {
		t.Error("a filter of pushed-down equalities alone needs no check beyond Loom's")
	}
}

func TestBadFiltersNameWhatIsWrong(t *testing.T) {
	for filter, want := range map[string]string{
		`{"keywords": "x"}`:                    `"keywords"`,
		`{"user_id": {"like": "a%"}}`:          `"like"`,
		`{"OR": {"user_id": "a"}}`:             "OR takes a list",
		`{"created_at": {"gte": "last week"}}`: "created_at.gte",
		`{"user_id": {"in": "alice"}}`:         "in takes a list",
		`{"metadata": "topic"}`:                "metadata takes an object",
	} {
		if _, err := compile(filterOf(t, filter)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", filter, err, want)
		}
	}
}

// Loom's provenance filters read as mem0's grammar reads any field; those the whole
// filter holds go to Loom's search, the rest are checked on the records.
func TestProvenanceFiltersMatchPushDownAndRefuse(t *testing.T) {
	r := record{Loom: loomFields{Entities: []string{"Harbour Survey", "Lotte"}, SourceClass: "imported", Verified: true}}
	for _, tc := range []struct {
		filter string
		want   bool
	}{
		{`{"entities": "harbour  SURVEY"}`, true},
		{`{"entities": {"contains": "lotte"}}`, true},
		{`{"entities": {"in": ["Nobody", "Lotte"]}}`, true},
		{`{"entities": {"ne": "Lotte"}}`, false},
		{`{"AND": [{"entities": "Lotte"}, {"entities": "Nobody"}]}`, false},
		{`{"source_class": "imported"}`, true},
		{`{"source_class": {"in": ["direct", "derived"]}}`, false},
		{`{"verified": true}`, true},
		{`{"verified": {"ne": true}}`, false},
		{`{"OR": [{"verified": false}, {"source_class": "imported"}]}`, true},
	} {
		p, err := compile(filterOf(t, tc.filter))
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		if got := p.check.match(&r); got != tc.want {
			t.Errorf("%s matched %v, want %v", tc.filter, got, tc.want)
		}
	}

	p, err := compile(filterOf(t, `{"user_id": "alice", "entities": "Harbour Survey", "AND": [{"entities": {"contains": "LOTTE"}}, {"source_class": {"in": ["imported", "external"]}}], "verified": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.provenance; !slices.Equal(sorted(got.Entities), []string{"harbour survey", "lotte"}) ||
		!slices.Equal(got.SourceClass, []string{"imported", "external"}) || got.Verified == nil || *got.Verified {
		t.Errorf("pushed down %+v", got)
	}
	if p.narrowsBeyondIdentity() {
		t.Error("a filter of pushed-down conditions alone needs no check beyond Loom's")
	}
	if p, _ := compile(filterOf(t, `{"OR": [{"verified": true}, {"entities": "Lotte"}]}`)); p.provenance.Verified != nil || p.provenance.Entities != nil || !p.narrowsBeyondIdentity() {
		t.Errorf("an OR is not pushed down: %+v", p.provenance)
	}

	for filter, want := range map[string]string{
		`{"source_class": "gossip"}`:         "source_class takes",
		`{"verified": "yes"}`:                "verified takes true or false",
		`{"verified": {"gt": false}}`:        `verified: operator "gt"`,
		`{"entities": {"gte": "a"}}`:         `entities: operator "gte"`,
		`{"entities": "  "}`:                 "entities takes an entity name",
		`{"source_class": {"in": "direct"}}`: "in takes a list",
	} {
		if _, err := compile(filterOf(t, filter)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", filter, err, want)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
