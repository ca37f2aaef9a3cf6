package events

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const schemaURL = "https://loomplane.dev/schemas/events/envelope.json"

func compileEnvelopeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("../schemas/events/envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat() // 2020-12 treats format as an annotation unless asked
	if err := c.AddResource(schemaURL, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validateAgainst(t *testing.T, sch *jsonschema.Schema, b []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

func TestSchemaAcceptsEncodedEnvelopes(t *testing.T) {
	sch := compileEnvelopeSchema(t)
	minimal := revisionEnvelope(t, TypeWritten, 1, false)
	minimal.Revision.PrevVersion = 0
	minimal.Revision.EmbeddingModel = ""
	minimal.Revision.EmbeddingDim = 0
	minimal.Revision.RequestID = ""
	envelopes := map[string]*Envelope{
		"written":                 revisionEnvelope(t, TypeWritten, 1, false),
		"written, first revision": minimal,
		"revised":                 revisionEnvelope(t, TypeRevised, 2, false),
		"revised with tombstone":  revisionEnvelope(t, TypeRevised, 3, true),
		"tombstoned":              revisionEnvelope(t, TypeTombstoned, 4, true),
		"restored":                revisionEnvelope(t, TypeRestored, 5, false),
		"redacted":                revisionEnvelope(t, TypeRedacted, 6, false),
		"status_changed":          revisionEnvelope(t, TypeStatusChanged, 7, false),
		"erased":                  plainEnvelope(TypeErased, 8),
		"parked":                  plainEnvelope(TypeParked, 9),
		"audited":                 audited(10),
		"usage_recorded":          usageRecorded(11),
		"version 1 revised":       validV1Revised(t),
		"version 2 revised":       validV2Revised(t),
		"turns":                   validTurns(t),
		"version 1 erased":        v1Erased(),
	}
	for name, e := range envelopes {
		t.Run(name, func(t *testing.T) {
			b, err := Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if err := validateAgainst(t, sch, b); err != nil {
				t.Fatalf("schema rejects %s:\n%v", b, err)
			}
		})
	}
}

func TestSchemaAcceptsAdditiveFields(t *testing.T) {
	sch := compileEnvelopeSchema(t)
	b, err := Encode(revisionEnvelope(t, TypeRevised, 2, false))
	if err != nil {
		t.Fatal(err)
	}
	b = withField(t, b, func(m map[string]any) {
		m["trace_id"] = "abc"
		m["revision"].(map[string]any)["new_plain_field"] = 1
	})
	if err := validateAgainst(t, sch, b); err != nil {
		t.Fatalf("schema rejects an additive field: %v", err)
	}
}

func TestSchemaRejectsBrokenEnvelopes(t *testing.T) {
	sch := compileEnvelopeSchema(t)
	revised, err := Encode(revisionEnvelope(t, TypeRevised, 2, false))
	if err != nil {
		t.Fatal(err)
	}
	parked, err := Encode(plainEnvelope(TypeParked, 3))
	if err != nil {
		t.Fatal(err)
	}
	erased, err := Encode(plainEnvelope(TypeErased, 4))
	if err != nil {
		t.Fatal(err)
	}
	v1, err := Encode(validV1Revised(t))
	if err != nil {
		t.Fatal(err)
	}
	v1erased, err := Encode(v1Erased())
	if err != nil {
		t.Fatal(err)
	}
	usage, err := Encode(usageRecorded(5))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		base   []byte
		mutate func(m map[string]any)
	}{
		{"missing seq", revised, func(m map[string]any) { delete(m, "seq") }},
		{"seq 0", revised, func(m map[string]any) { m["seq"] = 0 }},
		{"seq a string", revised, func(m map[string]any) { m["seq"] = "2" }},
		{"bad type", revised, func(m map[string]any) { m["type"] = "memory.deleted" }},
		{"revision type without revision", revised, func(m map[string]any) { delete(m, "revision") }},
		{"revision type without sealed", revised, func(m map[string]any) { delete(m, "sealed") }},
		{"parked with a revision", parked, func(m map[string]any) { m["revision"] = map[string]any{} }},
		{"parked with an erasure", parked, func(m map[string]any) {
			m["erasure"] = map[string]any{"id": "x", "scope": "namespace", "purge": false, "generation": 3, "withdrawn": 0}
		}},
		{"user erasure without user_ref", erased, func(m map[string]any) { delete(m["erasure"].(map[string]any), "user_ref") }},
		{"version 2 erasure with user_id", erased, func(m map[string]any) { m["erasure"].(map[string]any)["user_id"] = "u-42" }},
		{"version 1 user erasure without user_id", v1erased, func(m map[string]any) { delete(m["erasure"].(map[string]any), "user_id") }},
		{"version 2 revision with user_id", revised, func(m map[string]any) { m["revision"].(map[string]any)["user_id"] = "u-42" }},
		{"version 2 revision with content_sha256", revised, func(m map[string]any) {
			m["revision"].(map[string]any)["content_sha256"] = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
		}},
		{"version 2 revision without user_ref", revised, func(m map[string]any) { delete(m["revision"].(map[string]any), "user_ref") }},
		{"version 1 revision without content_sha256", v1, func(m map[string]any) { delete(m["revision"].(map[string]any), "content_sha256") }},
		{"erasure without generation", erased, func(m map[string]any) { delete(m["erasure"].(map[string]any), "generation") }},
		{"usage_recorded without usage", usage, func(m map[string]any) { delete(m, "usage") }},
		{"usage_recorded with no item", usage, func(m map[string]any) { m["usage"] = map[string]any{"items": []any{}} }},
		{"usage_recorded with a negative count", usage, func(m map[string]any) {
			m["usage"].(map[string]any)["items"].([]any)[0].(map[string]any)["touches"] = -1
		}},
		{"usage_recorded with sealed content", usage, func(m map[string]any) { m["sealed"] = revisedSealed(t, revised) }},
		{"revised with usage", revised, func(m map[string]any) {
			m["usage"] = map[string]any{"items": []any{map[string]any{"memory_id": "m", "touches": 1}}}
		}},
		{"revised with a redaction", revised, func(m map[string]any) { m["redaction"] = map[string]any{"versions": []int{1}} }},
		{"envelope_version 4", revised, func(m map[string]any) { m["envelope_version"] = 4 }},
		{"version 3 with the agent in the clear", revised, func(m map[string]any) { m["revision"].(map[string]any)["agent"] = "triage-bot" }},
		{"version 3 with the session in the clear", revised, func(m map[string]any) { m["revision"].(map[string]any)["session_id"] = "s-1" }},
		{"version 3 agent_ref not a reference", revised, func(m map[string]any) { m["revision"].(map[string]any)["agent_ref"] = "triage-bot" }},
		{"id with leading zero seq", revised, func(m map[string]any) { m["id"] = "acme/support/02" }},
		{"id with extra segment", revised, func(m map[string]any) { m["id"] = "acme/sup/port/2" }},
		{"org with slash", revised, func(m map[string]any) { m["org"] = "a/b" }},
		{"committed_at not UTC", revised, func(m map[string]any) { m["committed_at"] = "2026-03-14T10:26:53+01:00" }},
		{"committed_at not a time", revised, func(m map[string]any) { m["committed_at"] = "yesterdayZ" }},
		{"content_sha256 uppercase", v1, func(m map[string]any) {
			m["revision"].(map[string]any)["content_sha256"] = "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"
		}},
		{"revision missing memory_id", revised, func(m map[string]any) { delete(m["revision"].(map[string]any), "memory_id") }},
		{"sealed wrong alg", revised, func(m map[string]any) { m["sealed"].(map[string]any)["alg"] = "none" }},
		{"sealed nonce not base64", revised, func(m map[string]any) { m["sealed"].(map[string]any)["nonce"] = "not*base64*here!" }},
		{"sealed nonce wrong length", revised, func(m map[string]any) { m["sealed"].(map[string]any)["nonce"] = "AAAAAAAAAAAA" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := withField(t, tc.base, tc.mutate)
			if err := validateAgainst(t, sch, b); err == nil {
				t.Fatalf("schema accepts %s", b)
			}
		})
	}
}

// withField decodes b, lets mutate change it, and re-encodes it.
func withField(t *testing.T, b []byte, mutate func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	mutate(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// usageRecorded is a namespace's usage record: two memories' counts.
func usageRecorded(seq int64) *Envelope {
	e := plainEnvelope(TypeUsageRecorded, seq)
	e.Usage = &Usage{Items: []UsageItem{{MemoryID: "5b1d0a4e-8c2f-4d7e-9f10-2a3b4c5d6e7f", Touches: 2, Recalls: 5},
		{MemoryID: "0c9e8d7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f", Evidence: 1}}}
	return e
}

// revisedSealed is the sealed object of an encoded revision record.
func revisedSealed(t *testing.T, revised []byte) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(revised, &m); err != nil {
		t.Fatal(err)
	}
	return m["sealed"]
}

// v1Erased is a user's erasure record as Loom wrote it before envelope version 2.
func v1Erased() *Envelope {
	e := plainEnvelope(TypeErased, 8)
	e.Version, e.Erasure.UserRef, e.Erasure.UserID = 1, "", "u-42"
	return e
}
