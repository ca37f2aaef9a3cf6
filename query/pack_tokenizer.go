package query

import (
	"fmt"
	"strings"
	"sync"

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
}

// Count is the number of tokens text encodes to.
func (t packTokenizer) Count(text string) int {
	n, err := t.codec.Count(text)
	if err != nil { // only ErrorModeStrict refuses input; a count never fails otherwise
		return len(text)
	}
	return n
}

// codecs holds each encoding's codec, built once: building one decodes its vocabulary.
var codecs sync.Map // tokenizer.Encoding -> *codecOnce

type codecOnce struct {
	once  sync.Once
	codec tokenizer.Codec
	err   error
}

func codecOf(enc tokenizer.Encoding) (tokenizer.Codec, error) {
	v, _ := codecs.LoadOrStore(enc, &codecOnce{})
	c := v.(*codecOnce)
	c.once.Do(func() { c.codec, c.err = tokenizer.Get(enc) })
	return c.codec, c.err
}

// approximateFamilies are model name prefixes counted with o200k_base, approximately.
var approximateFamilies = []string{"claude", "anthropic", "llama", "meta-llama", "gemini", "gemma", "mistral", "mixtral", "qwen", "deepseek"}

// tokenizerFor settles a request's encoding and model: an encoding by name
// (o200k_base, cl100k_base), else the model's (an OpenAI model's own, another
// family's approximately), else o200k_base.
func tokenizerFor(encoding, model string) (packTokenizer, error) {
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
	c, err := codecOf(enc)
	if err != nil {
		return packTokenizer{}, fmt.Errorf("load the %s encoding: %w", enc, err)
	}
	return packTokenizer{Encoding: string(enc), Approximate: approximate, codec: c}, nil
}
