package events

import (
	"reflect"
	"testing"
	"time"
)

func TestCloudEventHeadersForRevision(t *testing.T) {
	e := revisionEnvelope(t, TypeRevised, 7, false)
	// A non-UTC committed_at must still be sent in UTC.
	e.CommittedAt = committedAt.In(time.FixedZone("CET", 3600))
	hs := CloudEventHeaders(e, "loom://loomd")
	want := []Header{
		{Key: "ce_specversion", Value: []byte("1.0")},
		{Key: "ce_id", Value: []byte("acme/support/7")},
		{Key: "ce_source", Value: []byte("loom://loomd")},
		{Key: "ce_type", Value: []byte("memory.revised")},
		{Key: "ce_time", Value: []byte("2026-03-14T09:26:53.589793238Z")},
		{Key: "ce_subject", Value: []byte("mem_01HZX")},
		{Key: "content-type", Value: []byte("application/json")},
	}
	if !reflect.DeepEqual(hs, want) {
		t.Fatalf("headers\n%q\nwant\n%q", hs, want)
	}
}

func TestCloudEventHeadersWithoutRevision(t *testing.T) {
	hs := CloudEventHeaders(plainEnvelope(TypeParked, 9), "loom://loomd")
	if _, ok := HeaderValue(hs, "ce_subject"); ok {
		t.Fatal("a record without a revision has a ce_subject")
	}
	for key, want := range map[string]string{
		"ce_specversion": "1.0",
		"ce_id":          "acme/support/9",
		"ce_type":        "loom.parked",
		"content-type":   "application/json",
	} {
		if got, ok := HeaderValue(hs, key); !ok || got != want {
			t.Errorf("%s = %q, %v; want %q", key, got, ok, want)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	hs := []Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}, {Key: "a", Value: []byte("2")}}
	if v, ok := HeaderValue(hs, "a"); !ok || v != "1" {
		t.Errorf("a = %q, %v; want the first, 1", v, ok)
	}
	if v, ok := HeaderValue(hs, "b"); !ok || v != "" {
		t.Errorf("b = %q, %v; want present and empty", v, ok)
	}
	if _, ok := HeaderValue(hs, "A"); ok {
		t.Error("header keys matched case-insensitively")
	}
}

func TestRefGenerationHeader(t *testing.T) {
	if hs := RefGenerationHeader(0); hs != nil {
		t.Errorf("a record naming no one by reference has headers %q", hs)
	}
	if v, ok := HeaderValue(RefGenerationHeader(2), "ce_loomrefgen"); !ok || v != "2" {
		t.Errorf("ce_loomrefgen = %q, %v; want 2", v, ok)
	}
}
