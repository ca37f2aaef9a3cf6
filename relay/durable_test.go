package relay

import "testing"

func TestSyncStandbysNeededReadsSynchronousStandbyNames(t *testing.T) {
	for names, want := range map[string]int{
		"":                    0,
		"  ":                  0,
		"loom_standby":        1,
		"*":                   1,
		"a, b, c":             1,
		"2 (a, b, c)":         2,
		"FIRST 2 (a, b, c)":   2,
		"first 3(a,b,c)":      3,
		"ANY 2 (a, b, c)":     2,
		"any 1 (\"s 1\", s2)": 1,
		"first":               1, // a standby named "first"
		`"2 (x)"`:             1, // a quoted name, not a count
	} {
		if got := syncStandbysNeeded(names); got != want {
			t.Errorf("synchronous_standby_names %q: %d standbys needed, want %d", names, got, want)
		}
	}
}

// A batch is published only when as many synchronous standbys flushed it as
// synchronous_standby_names asks for; otherwise the reason says what is missing.
func TestHoldReasonFollowsPostgresReleaseRule(t *testing.T) {
	for _, c := range []struct {
		name string
		s    standbyState
		want string
	}{
		{"no synchronous standby configured: nothing waits", standbyState{names: ""}, ""},
		{"the one standby flushed it", standbyState{names: "s", attached: 1, flushed: 1}, ""},
		{"the one standby is behind", standbyState{names: "s", attached: 1}, HoldStandbyBehind},
		{"no standby attached", standbyState{names: "s"}, HoldStandbyDetached},
		{"FIRST 2 with one attached", standbyState{names: "FIRST 2 (a, b, c)", attached: 1, flushed: 1}, HoldStandbyDetached},
		{"FIRST 2, both flushed", standbyState{names: "FIRST 2 (a, b, c)", attached: 2, flushed: 2}, ""},
		{"ANY 2 of 3, two flushed", standbyState{names: "ANY 2 (a, b, c)", attached: 3, flushed: 2}, ""},
		{"ANY 2 of 3, one flushed", standbyState{names: "ANY 2 (a, b, c)", attached: 3, flushed: 1}, HoldStandbyBehind},
		{"positions hidden from this role", standbyState{names: "s", hidden: 1}, HoldStatsHidden},
	} {
		if got := holdReason(c.s); got != c.want {
			t.Errorf("%s: hold reason %q, want %q", c.name, got, c.want)
		}
	}
}
