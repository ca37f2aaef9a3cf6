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
		if got := checkSubject(Row{SubjectCommitment: c, Subject: tc.s}) == ""; got != tc.ok {
			t.Errorf("%s: holds %v, want %v", tc.name, got, tc.ok)
		}
	}
	if checkSubject(Row{Subject: Subject{"office", sha, "alice", ""}}) != "" {
		t.Error("a row written before commitments was judged")
	}
}

// A FormatWriter row's agent and session are behind its commitment: they hold while
// they match it, and a scrub holds once they are blank with the other four; an agent
// or a session changed, kept alone after a scrub, or added to a row with no
// commitment, does not.
func TestCheckWriterSubject(t *testing.T) {
	salt := SubjectSalt([]byte("0123456789abcdef0123456789abcdef"), "acme/support/7")
	sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	c := WriterSubjectCommitment(salt, "office", sha, "alice", "travel-bot", "s-9")
	if c == SubjectCommitment(salt, "office", sha, "alice") {
		t.Fatal("the writer commitment is the version 1 commitment")
	}
	full := Subject{"office", sha, "alice", salt}
	row := func(s Subject, agent, session, commitment string) Row {
		return Row{Format: FormatWriter, Agent: agent, SessionID: session, SubjectCommitment: commitment, Subject: s}
	}
	for _, tc := range []struct {
		name string
		r    Row
		ok   bool
	}{
		{"as written", row(full, "travel-bot", "s-9", c), true},
		{"scrubbed", row(Subject{}, "", "", c), true},
		{"agent changed", row(full, "mallory-bot", "s-9", c), false},
		{"session changed", row(full, "travel-bot", "s-10", c), false},
		{"agent and session swapped", row(full, "s-9", "travel-bot", c), false},
		{"agent kept after a scrub", row(Subject{}, "travel-bot", "", c), false},
		{"session kept after a scrub", row(Subject{}, "", "s-9", c), false},
		{"agent added to a row of no commitment", row(Subject{}, "travel-bot", "", ""), false},
		{"a row of no commitment", row(Subject{}, "", "", ""), true},
	} {
		if got := checkSubject(tc.r) == ""; got != tc.ok {
			t.Errorf("%s: holds %v, want %v", tc.name, got, tc.ok)
		}
	}
}
