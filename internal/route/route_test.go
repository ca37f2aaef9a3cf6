package route

import (
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/memrow"
)

func TestIdentity(t *testing.T) {
	anyone := auth.Principal{Org: "acme"}
	alice := auth.Principal{Org: "acme", ReadUserID: "alice"}
	s1 := auth.Principal{Org: "acme", ReadSessionID: "s1"}
	cases := []struct {
		name  string
		p     auth.Principal
		n     Names
		want  memrow.Identity
		other bool
	}{
		{"absent names are -", anyone, Names{}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "k"}, false},
		{"names as given", anyone, Names{Agent: "bot", UserID: "bob", SessionID: "s1"}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "bot", UserID: "bob", SessionID: "s1", MemoryKey: "k"}, false},
		{"a user-bound token addresses its user", alice, Names{Agent: "bot"}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "bot", UserID: "alice", SessionID: "-", MemoryKey: "k"}, false},
		{"its own user named", alice, Names{UserID: "alice"}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "alice", SessionID: "-", MemoryKey: "k"}, false},
		{"another user named", alice, Names{UserID: "bob"}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "bob", SessionID: "-", MemoryKey: "k"}, true},
		{"a session-bound token addresses its session", s1, Names{UserID: "alice"}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "alice", SessionID: "s1", MemoryKey: "k"}, false},
		{"another session named", s1, Names{SessionID: "s2"}, memrow.Identity{Org: "acme", Namespace: "ns", Agent: "-", UserID: "-", SessionID: "s2", MemoryKey: "k"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, other := Identity(tc.p, "ns", "k", tc.n)
			if id != tc.want || other != tc.other {
				t.Fatalf("got %+v other=%v, want %+v other=%v", id, other, tc.want, tc.other)
			}
		})
	}
}

func TestDecodeKey(t *testing.T) {
	if k, err := DecodeKey("a%3Ab"); err != nil || k != "a:b" {
		t.Fatalf("%q %v", k, err)
	}
	if _, err := DecodeKey("a%zz"); err == nil {
		t.Fatal("bad percent-encoding accepted")
	}
}
