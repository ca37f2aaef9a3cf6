package query

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tiktoken-go/tokenizer"

	"github.com/loomplane/loom/internal/httperr"
)

// A pack's budget is counted with OpenAI's BPE encodings as tiktoken-go/tokenizer
// implements them: its vocabularies are embedded in the module, so a count needs no
// download at run time, and its tests check it against tiktoken's own counts. The model
// families with no published encoding (Claude, Llama, Gemini, Mistral) are counted with
// o200k_base and the answer says approximate: their tokenizers split text into a
// similar number of pieces, but not the same.

// packTokenizer counts a pack's tokens.
type packTokenizer struct {
	Encoding    string `json:"encoding"`
	Approximate bool   `json:"approximate"`
	codec       tokenizer.Codec
	counts      *lru.Cache[countKey, int]
}

// countKey is a counted text, by its SHA-256, under its encoding.
type countKey struct {
	encoding string
	sum      [sha256.Size]byte
}

// Count is the number of tokens text encodes to. The same text counts the same, so
// the count of a line is kept (a fact, a change, a turn recur from pack to pack), and
// so is a block's (the same state packs the same block).
func (t packTokenizer) Count(text string) int {
	k := countKey{t.Encoding, sha256.Sum256([]byte(text))}
	if t.counts != nil {
		if n, ok := t.counts.Get(k); ok {
			return n
		}
	}
	n, err := t.codec.Count(text)
	if err != nil { // only ErrorModeStrict refuses input; a count never fails otherwise
		n = len(text)
	}
	if t.counts != nil {
		t.counts.Add(k, n)
	}
	return n
}

// tokenizers holds the read side's codecs, each built once (building one decodes its
// vocabulary), and the counts of recent lines: counting is a regexp split and a BPE
// merge per piece, the larger part of a pack's own time.
type tokenizers struct {
	mu     sync.Mutex
	codecs map[tokenizer.Encoding]tokenizer.Codec
	counts *lru.Cache[countKey, int]
}

func newTokenizers(counts int) *tokenizers {
	c, _ := lru.New[countKey, int](max(counts, 1))
	return &tokenizers{codecs: map[tokenizer.Encoding]tokenizer.Codec{}, counts: c}
}

func (t *tokenizers) codec(enc tokenizer.Encoding) (tokenizer.Codec, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.codecs[enc]; ok {
		return c, nil
	}
	c, err := tokenizer.Get(enc)
	if err == nil {
		t.codecs[enc] = c
	}
	return c, err
}

// approximateFamilies are model name prefixes counted with o200k_base, approximately.
var approximateFamilies = []string{"claude", "anthropic", "llama", "meta-llama", "gemini", "gemma", "mistral", "mixtral", "qwen", "deepseek"}

// For settles a request's encoding and model: an encoding by name
// (o200k_base, cl100k_base), else the model's (an OpenAI model's own, another
// family's approximately), else o200k_base.
func (t *tokenizers) For(encoding, model string) (packTokenizer, error) {
	var enc tokenizer.Encoding
	approximate := false
	switch {
	case encoding != "":
		switch e := tokenizer.Encoding(encoding); e {
		case tokenizer.O200kBase, tokenizer.Cl100kBase:
			enc = e
		default:
			return packTokenizer{}, httperr.Validation("tokenizer", "tokenizer must be o200k_base or cl100k_base")
		}
	case model != "":
		m := strings.ToLower(model)
		if c, err := tokenizer.ForModel(tokenizer.Model(m)); err == nil {
			enc = tokenizer.Encoding(c.GetName())
			if enc != tokenizer.O200kBase && enc != tokenizer.Cl100kBase {
				return packTokenizer{}, httperr.Validation("model", fmt.Sprintf("model %q uses %s, which a pack does not count; name a current model", model, enc))
			}
			break
		}
		for _, f := range approximateFamilies {
			if strings.HasPrefix(m, f) {
				enc, approximate = tokenizer.O200kBase, true
			}
		}
		if enc == "" {
			return packTokenizer{}, httperr.Validation("model", fmt.Sprintf("model %q is of no family a pack counts: OpenAI's (gpt-4o, gpt-4.1, gpt-5, o1-o4, gpt-4, gpt-3.5) or, approximately, Claude, Llama, Gemini, Mistral, Qwen, DeepSeek", model))
		}
	default:
		enc = tokenizer.O200kBase
	}
	c, err := t.codec(enc)
	if err != nil {
		return packTokenizer{}, fmt.Errorf("load the %s encoding: %w", enc, err)
	}
	return packTokenizer{Encoding: string(enc), Approximate: approximate, codec: c, counts: t.counts}, nil
}

// packCountCache is how many counts the read side keeps (about 64 bytes each).
const packCountCache = 65536
