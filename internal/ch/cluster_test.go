package ch

import "testing"

// On a cluster every insert waits for a quorum of replicas; on one server it does not,
// and 18.16, which knows no async_insert, is sent no settings at all.
func TestSessionSettingsFollowTheDeployment(t *testing.T) {
	old := Capabilities{Major: 18, Minor: 16}
	if s := sessionSettings(old, ""); len(s) != 0 {
		t.Fatalf("18.16, one server: %v, want no settings", s)
	}
	modern := Capabilities{Major: 24, Minor: 8, AsyncInsert: true}
	s := sessionSettings(modern, "")
	if s["async_insert"] != 0 || s["insert_quorum"] != nil {
		t.Fatalf("24.8, one server: %v", s)
	}
	s = sessionSettings(modern, "loom")
	if s["async_insert"] != 0 || s["insert_quorum"] != "auto" || s["insert_quorum_parallel"] != 0 {
		t.Fatalf("24.8 on a cluster: %v", s)
	}
}
