package command

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
)

// A value goes to the embedder before the round's read only when nothing the request
// or the namespace's policy says keeps it from being embedded: never a value of the
// high tier (asked for, or found by the detector), one the blacklist or the char limit
// refuses, or one of a type that is not searchable (named, or retyped to it).
func TestAValueIsEmbeddedAheadOnlyWhenTheRequestAndPolicyEmbedIt(t *testing.T) {
	pol := &policy{config: NamespaceConfig{Types: map[string]TypeConfig{
		"note":  {Retype: "episodic"},
		"short": {CharLimit: 10},
	}}, blacklist: []blacklistEntry{{pattern: "forbidden", re: regexp.MustCompile("forbidden")}}}
	write := func(value string, req setRequest) *setWrite {
		raw, _ := json.Marshal(value)
		req.Value = raw
		w, err := newSetWrite("memory.set", auth.Principal{}, memrow.Identity{Org: "o", Namespace: "n", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "k"}, &req, "")
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	cases := []struct {
		name  string
		w     *setWrite
		ahead bool
	}{
		{"a plain fact", write("the harbour opens at dawn", setRequest{}), true},
		{"a searchable type it names", write("the harbour opens at dawn", setRequest{MemoryType: "decision"}), true},
		{"the high tier asked for", write("the harbour opens at dawn", setRequest{Sensitivity: memrow.SensitivityHigh}), false},
		{"the high tier the detector finds", write("mail me at keeper@example.com", setRequest{}), false},
		{"the detector over a request for normal", write("mail me at keeper@example.com", setRequest{Sensitivity: memrow.SensitivityNormal}), false},
		{"a blacklisted value", write("a forbidden fact", setRequest{}), false},
		{"over the type's char limit", write("longer than ten characters", setRequest{MemoryType: "short"}), false},
		{"a type that is not searchable", write("the harbour opens at dawn", setRequest{MemoryType: "profile"}), false},
		{"a type retyped to one that is not", write("the harbour opens at dawn", setRequest{MemoryType: "note"}), false},
	}
	for _, c := range cases {
		if got := embedsAsRequested(c.w, pol, 1000); got != c.ahead {
			t.Errorf("%s: embedded ahead %v, want %v", c.name, got, c.ahead)
		}
	}
	if embedsAsRequested(write("the harbour opens at dawn", setRequest{}), &policy{deleted: true}, 1000) {
		t.Error("a deleted namespace's write was embedded ahead")
	}
}
