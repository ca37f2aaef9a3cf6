package auditchain

import "testing"

// A row's subject fields hold while they match their commitment, and a scrub of all
// four holds too; any one changed, or the salt dropped alone, does not.
func TestCheckSubject(t *testing.T) {
	salt := SubjectSalt([]byte("0123456789abcdef0123456789abcdef"), "acme/support/7")
	if salt != SubjectSalt([]byte("0123456789abcdef0123456789abcdef"), "acme/support/7") || salt == SubjectSalt([]byte("another key......................"), "acme/support/7") {
		t.Fatal("the salt is not derived from the data key and the record id alone")
	}
	sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	c := SubjectCommitment(salt, "office", sha, "alice")
	for _, tc := range []struct {
		name string
		s    Subject
		ok   bool
	}{
		{"as written", Subject{"office", sha, "alice", salt}, true},
		{"scrubbed", Subject{}, true},
		{"key changed", Subject{"forged", sha, "alice", salt}, false},
		{"hash changed", Subject{"office", sha[:63] + "0", "alice", salt}, false},
		{"user changed", Subject{"office", sha, "mallory", salt}, false},
		{"salt dropped alone", Subject{"office", sha, "alice", ""}, false},
		{"fields moved between columns", Subject{"alice", sha, "office", salt}, false},
	} {
		if got := checkSubject(c, tc.s) == ""; got != tc.ok {
			t.Errorf("%s: holds %v, want %v", tc.name, got, tc.ok)
		}
	}
	if checkSubject("", Subject{"office", sha, "alice", ""}) != "" {
		t.Error("a row written before commitments was judged")
	}
}
