package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// Seal writes a content's vectors itself, after its other fields (contentJSON): what
// opens must be what encoding/json's whole encoding decodes to, for every shape of
// vectors a content carries (none, empty windows among the chunks), and with text that
// HTML escaping would change.
func TestSealedContentDecodesAsItsWholeEncoding(t *testing.T) {
	from := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	base := Content{MemoryKey: "diet & <food>", Value: json.RawMessage(`{"text":"likes <b>tea</b> & \"scones\"","n":1.5}`),
		Tags: []string{"food", "ü"}, Entities: []string{"tea"}, EntityTypes: map[string]string{"tea": "drink"},
		Relations: []Relation{{Subject: "alice", Predicate: "likes", Object: "tea", ValidFrom: &from}},
		UserID:    "alice", ContentSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		SubjectSalt: "salt", Agent: "a", SessionID: "s1"}
	cases := map[string]func(c *Content){
		"no vectors":         func(*Content) {},
		"value vector":       func(c *Content) { c.Embedding = Vector{0.25, -1, 3.5e-7} },
		"both vectors":       func(c *Content) { c.Embedding, c.KeyEmbedding = Vector{1, 2, 3}, Vector{-0.5} },
		"key vector only":    func(c *Content) { c.KeyEmbedding = Vector{4, 5} },
		"chunks":             func(c *Content) { c.Embedding, c.ChunkEmbeddings = Vector{1}, []Vector{{1}, {2, 3}} },
		"an empty chunk":     func(c *Content) { c.ChunkEmbeddings = []Vector{{1}, nil, {2}} },
		"no tags, no value":  func(c *Content) { c.Tags, c.Value, c.Entities = nil, nil, nil },
		"bare with a vector": func(c *Content) { *c = Content{Embedding: Vector{7}} },
	}
	key := make([]byte, dataKeySize)
	for name, shape := range cases {
		t.Run(name, func(t *testing.T) {
			c := base
			shape(&c)
			whole, err := marshalJSON(&c)
			if err != nil {
				t.Fatal(err)
			}
			var want Content
			if err := json.Unmarshal(whole, &want); err != nil {
				t.Fatal(err)
			}
			s, err := Seal(key, "acme/notes/1", &c)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := openBytes(key, "acme/notes/1", s)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(plain) {
				t.Fatalf("the sealed content is no JSON: %s", plain)
			}
			var got Content
			if err := json.Unmarshal(plain, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the sealed content decodes to\n%+v\nwant\n%+v\n(%s)", got, want, plain)
			}
			opened, err := OpenInPlace(key, "acme/notes/1", s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*opened, want) {
				t.Errorf("OpenInPlace reads\n%+v\nwant\n%+v", *opened, want)
			}
		})
	}
}

// AppendSealedJSON writes the bytes json.Marshal writes for sealed content.
func TestAppendSealedJSONIsJSONMarshal(t *testing.T) {
	key := make([]byte, dataKeySize)
	sealed, err := Seal(key, "acme/notes/1", &Content{MemoryKey: "k", Embedding: Vector{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sealed{sealed, {Alg: SealAlg, Nonce: []byte{}, Ciphertext: []byte{1}}, {Alg: `a"<b>`}} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendSealedJSON([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendSealedJSON wrote\n%s\nwant\n%s", got[1:], want)
		}
	}
}
