package extraction

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestExtractedKeysNameSubjectAndAttribute(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"user.home_city", "Lisbon", "user.home_city"},
		{"User.Home City", "Lisbon", "user.home_city"},
		{"user.city.lisbon", "Lisbon", "user.city"},               // the value is no part of the key
		{"user.employer.acme_corp", "Acme Corp", "user.employer"}, // nor several words of it
		{"user.name", "User's name is Anna", "user.name"},
		{"lisbon", "Lisbon", "lisbon"},               // a key that is only the value keeps its one segment
		{"user.tea", "Drinks green tea", "user.tea"}, // cut, no attribute would be left
		{"user.city.porto", "Lives in Porto", "user.city"},
		{"  ..  ", "x", ""},
	} {
		if got := normalizeKey(tc.key, tc.value); got != tc.want {
			t.Errorf("normalizeKey(%q, %q) = %q, want %q", tc.key, tc.value, got, tc.want)
		}
	}
}

func TestEchoesAndDrops(t *testing.T) {
	for _, tc := range []struct {
		fact, stored string
		want         bool
	}{
		{"User lives in Lisbon", "Lives in Lisbon, Portugal", true},
		{"User lives in Porto", "Lives in Lisbon, Portugal", false},
		{"User is 41", "User is 40", false}, // another value is an update, not an echo
		{"", "anything", false},
	} {
		if got := restates(tc.fact, tc.stored); got != tc.want {
			t.Errorf("restates(%q, %q) = %t, want %t", tc.fact, tc.stored, got, tc.want)
		}
	}
	for v, want := range map[string]bool{
		"Ran the test suite":                                        true,
		"The assistant searched the web for flights":                true,
		"Called the search_memories tool":                           true,
		"The assistant searched and found the bug is in the parser": false,
		"User ran a marathon in 2019":                               false,
		"Prefers window seats":                                      false,
	} {
		if got := narration(v); got != want {
			t.Errorf("narration(%q) = %t, want %t", v, got, want)
		}
	}
	for v, want := range map[string]bool{
		"The tests are passing":              true,
		"Committed the fix to main":          true,
		"Will add retries next":              true,
		"Currently refactoring the parser":   true,
		"The project builds with make":       false,
		"Error codes follow the seeds' list": false,
	} {
		if got := nonDurable(v); got != want {
			t.Errorf("nonDurable(%q) = %t, want %t", v, got, want)
		}
	}
}

func TestLongTranscriptsAreSplitAtMessagesAndMerged(t *testing.T) {
	msgs := []Message{{Role: "user", Content: strings.Repeat("a", 600)}, {Role: "assistant", Content: strings.Repeat("b", 600)},
		{Role: "user", Content: strings.Repeat("c", 300)}, {Role: "user", Content: strings.Repeat("d", 2000)}}
	ws := windows(msgs, 1000)
	if len(ws) != 3 || ws[0] != (window{0, 0}) || ws[1] != (window{1, 2}) || ws[2] != (window{3, 3}) {
		t.Fatalf("windows = %v", ws)
	}
	var answers []extractionAnswer
	for _, raw := range []string{
		`{"facts":[{"key":"user.city","value":"Lisbon","message_index":0,"tags":[]},{"key":"user.pet","value":"a cat","message_index":0,"tags":[]}],"forget":[]}`,
		// A later window restates the city, forgets the pet, and names an index outside itself.
		`{"facts":[{"key":"user.city","value":"Porto","message_index":2,"tags":[]},{"key":"user.diet","value":"vegetarian","message_index":99,"tags":[]}],
		  "forget":[{"key":"user.pet","message_index":1}]}`,
		// Then the pet comes back, after the forget.
		`{"facts":[{"key":"user.pet","value":"a dog","message_index":3,"tags":[]}],"forget":[]}`,
	} {
		var a extractionAnswer
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
	}
	facts, forgets := mergeWindows(ws, answers)
	got := map[string]string{}
	for _, f := range facts {
		got[f.key] = f.value
		if f.key == "user.diet" && f.msg != 2 {
			t.Errorf("user.diet came from message %d, want 2 (the window's last)", f.msg)
		}
	}
	if len(facts) != 3 || got["user.city"] != "Porto" || got["user.pet"] != "a dog" || got["user.diet"] != "vegetarian" {
		t.Fatalf("facts %v", got)
	}
	if len(forgets) != 0 {
		t.Fatalf("forgets %v: the later statement of user.pet undoes the forget", forgets)
	}
}

func TestPipelineSteps(t *testing.T) {
	if got, err := resolvePipeline(nil, []string{stepVerify}); err != nil || len(got) != len(defaultPipeline())-1 {
		t.Fatalf("skip one: %v, %v", got, err)
	}
	if got, err := resolvePipeline([]string{stepExtract, stepHashDedup, stepNarration}, nil); err != nil || got[1] != stepHashDedup {
		t.Fatalf("reorder: %v, %v", got, err)
	}
	for _, tc := range []struct{ steps, skip []string }{
		{[]string{"loom.nope"}, nil}, {nil, []string{stepExtract}}, {[]string{stepExtract, stepExtract}, nil},
	} {
		if _, err := resolvePipeline(tc.steps, tc.skip); err == nil {
			t.Errorf("resolvePipeline(%v, %v) accepted", tc.steps, tc.skip)
		}
	}
}

func TestAPipelineIsReorderedOrCutPerRequest(t *testing.T) {
	got, err := resolvePipeline(nil, []string{stepVerify, stepBulkWrite})
	if err != nil || slices.Contains(got, stepVerify) || slices.Contains(got, stepBulkWrite) || len(got) != len(defaultPipeline())-2 {
		t.Fatalf("skipping two steps: %v, %v", got, err)
	}
	order := []string{stepExtract, stepHashDedup, stepCategories}
	if got, err := resolvePipeline(order, nil); err != nil || !slices.Equal(got, order) {
		t.Fatalf("an order of the request's: %v, %v", got, err)
	}
	for _, bad := range []struct{ steps, skip []string }{
		{skip: []string{stepExtract}},
		{steps: []string{stepCategories, stepBulkWrite}},
		{steps: []string{"loom.summarise"}},
		{skip: []string{stepNarration, stepNarration}},
	} {
		if _, err := resolvePipeline(bad.steps, bad.skip); err == nil {
			t.Errorf("steps %v skip %v: accepted", bad.steps, bad.skip)
		}
	}
}
