package events

import (
	"math"
	"testing"
)

func TestRecordKey(t *testing.T) {
	if got := string(RecordKey("acme", "support")); got != "acme/support" {
		t.Fatalf("RecordKey = %q", got)
	}
}

func TestRecordIDRoundTrip(t *testing.T) {
	cases := []struct {
		org, ns string
		seq     int64
		id      string
	}{
		{"acme", "support", 1, "acme/support/1"},
		{"org-1", "ns.with:odd chars", 42, "org-1/ns.with:odd chars/42"},
		{"o", "n", math.MaxInt64, "o/n/9223372036854775807"},
	}
	for _, tc := range cases {
		id := RecordID(tc.org, tc.ns, tc.seq)
		if id != tc.id {
			t.Errorf("RecordID(%q, %q, %d) = %q, want %q", tc.org, tc.ns, tc.seq, id, tc.id)
		}
		org, ns, seq, err := ParseRecordID(id)
		if err != nil || org != tc.org || ns != tc.ns || seq != tc.seq {
			t.Errorf("ParseRecordID(%q) = %q, %q, %d, %v", id, org, ns, seq, err)
		}
	}
}

func TestParseRecordIDRejectsMalformed(t *testing.T) {
	for _, id := range []string{
		"",
		"acme",
		"acme/support",
		"acme/support/",
		"/support/1",
		"acme//1",
		"acme/support/0",
		"acme/support/-1",
		"acme/support/+1",
		"acme/support/01",
		"acme/support/1.0",
		"acme/support/1 ",
		"acme/support/x",
		"acme/sup/port/1",
		"acme/support/1/",
		"acme/support/9223372036854775808", // overflows int64
	} {
		if org, ns, seq, err := ParseRecordID(id); err == nil {
			t.Errorf("ParseRecordID(%q) = %q, %q, %d; want an error", id, org, ns, seq)
		}
	}
}
