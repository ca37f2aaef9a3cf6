package query

import (
	"testing"
)

func TestCheckRecallNamesTheField(t *testing.T) {
	n := func(i int) *int { return &i }
	for _, tc := range []struct {
		req          recallRequest
		field        string
		window, topK int
	}{
		{recallRequest{Query: "tea"}, "", defaultRecallWindow, defaultRecallTopK},
		{recallRequest{Key: "user.drink", Window: n(0), TopK: n(50)}, "", 0, 50},
		{recallRequest{}, "query", 0, 0},
		{recallRequest{Query: " ", Key: " "}, "query", 0, 0},
		{recallRequest{Query: "tea", MemoryID: "3f0f7a4e-2c1b-4e8a-9d3c-1a2b3c4d5e6f"}, "query", 0, 0},
		{recallRequest{MemoryID: "nope"}, "memory_id", 0, 0},
		{recallRequest{Key: "a\x00b"}, "memory_key", 0, 0},
		{recallRequest{Query: "tea", Window: n(21)}, "window", 0, 0},
		{recallRequest{Query: "tea", Window: n(-1)}, "window", 0, 0},
		{recallRequest{Query: "tea", TopK: n(0)}, "top_k", 0, 0},
		{recallRequest{Query: "tea", TopK: n(51)}, "top_k", 0, 0},
	} {
		w, k, err := checkRecall(&tc.req)
		switch {
		case tc.field == "" && (err != nil || w != tc.window || k != tc.topK):
			t.Errorf("%+v: %d, %d, %v", tc.req, w, k, err)
		case tc.field != "" && fieldOf(err) != tc.field:
			t.Errorf("%+v: %v, want 422 on %s", tc.req, err, tc.field)
		}
	}
}
