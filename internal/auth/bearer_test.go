package auth

import "testing"

// The Authorization scheme is matched in any case (RFC 7235); the token itself is not
// touched, and a header without one is no token.
func TestBearerReadsTheSchemeInAnyCase(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer loom_a_b": "loom_a_b", "bearer loom_a_b": "loom_a_b", "BEARER  loom_a_b ": "loom_a_b",
		"Basic dXNlcg==": "", "Bearer": "", "Bearer   ": "", "": "", "loom_a_b": "",
	} {
		got, ok := Bearer(header)
		if got != want || ok != (want != "") {
			t.Errorf("Bearer(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
}
