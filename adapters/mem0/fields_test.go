package mem0

import "testing"

// Loom's fields of what the facade sent are named by the mem0 request's own: a message
// by its index in the request, the empty ones the facade left out counted.
func TestLoomsFieldsAreNamedByMem0s(t *testing.T) {
	kept := []textMessage{{"user", "a", 1}, {"assistant", "b", 3}} // messages 0 and 2 were empty
	for _, tc := range []struct {
		name func(string) string
		loom string
		mem0 string
	}{
		{addFields(kept), "entries[1].value", "messages[3].content"},
		{addFields(kept), "entries[0].valid_to", "expiration_date"},
		{addFields(kept), "entries[2].value", ""}, // no such entry: answered as it came
		{addFields(kept), "entries[0].memory_key", ""},
		{inferFields(kept), "messages[0].role", "messages[1].role"},
		{inferFields(kept), "messages[1].content", "messages[3].content"},
		{inferFields(kept), "user_id", ""},
		{updateFields(""), "value", "text"},
		{updateFields("memories[4]."), "value", "memories[4].text"},
		{updateFields(""), "valid_to", ""},
	} {
		if got := tc.name(tc.loom); got != tc.mem0 {
			t.Errorf("Loom's %s is mem0's %q, want %q", tc.loom, got, tc.mem0)
		}
	}
}
