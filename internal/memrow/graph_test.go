package memrow

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/events"
)

func TestCanonicalNames(t *testing.T) {
	for in, want := range map[string]string{"New  York": "new york", " London\t": "london", "ÉCOLE": "école"} {
		if got := EntityName(in); got != want {
			t.Errorf("EntityName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Predicate(" Lives  In "); got != "lives_in" {
		t.Errorf("Predicate = %q, want lives_in", got)
	}
}

func TestParseEntities(t *testing.T) {
	raw := []json.RawMessage{json.RawMessage(`"London"`), json.RawMessage(`{"name": "Acme Corp", "type": "company"}`),
		json.RawMessage(`"london"`)}
	names, types, err := ParseEntities(raw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, "|") != "London|Acme Corp" || types["Acme Corp"] != "company" || len(types) != 1 {
		t.Fatalf("names %v types %v: want one spelling per canonical name and the declared type", names, types)
	}
	for body, field := range map[string]string{
		`[1]`:                                "entities[0]",
		`["ok", {"name": "x", "kind": 1}]`:   "entities[1]",
		`[""]`:                               "entities[0].name",
		`["  "]`:                             "entities[0].name",
		`[{"name": "x", "type": "a\u0001"}]`: "entities[0].type",
	} {
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatal(err)
		}
		_, _, err := ParseEntities(raw)
		fieldErr(t, err, field, CodeValidationFailed, "")
	}
	many := make([]json.RawMessage, MaxEntities+1)
	for i := range many {
		many[i] = json.RawMessage(`"e"`)
	}
	_, _, err = ParseEntities(many)
	fieldErr(t, err, "entities", CodeValidationFailed, "more than")
}

func TestValidateRelations(t *testing.T) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ok := RelationInput{Subject: "user", Predicate: "lives in", Object: "Berlin", ValidFrom: &day}
	if err := ValidateRelations([]RelationInput{ok}); err != nil {
		t.Fatal(err)
	}
	before := day.Add(-time.Hour)
	for i, c := range []struct {
		rels  []RelationInput
		field string
	}{
		{[]RelationInput{{Predicate: "p", Object: "o"}}, "relations[0].subject"},
		{[]RelationInput{ok, {Subject: "s", Predicate: " ", Object: "o"}}, "relations[1].predicate"},
		{[]RelationInput{{Subject: "s", Predicate: "p", Object: "o", ValidFrom: &day, ValidTo: &before}}, "relations[0].valid_to"},
		{[]RelationInput{ok, {Subject: "User", Predicate: "Lives_In", Object: "berlin"}}, "relations[1]"},
		{make([]RelationInput, MaxRelations+1), "relations"},
	} {
		err := ValidateRelations(c.rels)
		if err == nil {
			t.Fatalf("case %d: accepted", i)
		}
		fieldErr(t, err, c.field, CodeValidationFailed, "")
	}
	got := Relations([]RelationInput{ok}, func(p string) string {
		if p != "lives_in" {
			t.Fatalf("cardinality asked for %q, want the canonical predicate", p)
		}
		return events.CardinalitySingle
	})
	if got[0].Predicate != "lives_in" || got[0].Cardinality != events.CardinalitySingle || !got[0].ValidFrom.Equal(day) {
		t.Fatalf("Relations = %+v", got[0])
	}
}
