package auth

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/loomplane/loom/internal/httperr"
)

func TestBoundPrincipalActsOnItsUserAlone(t *testing.T) {
	alice := Principal{Org: "acme", Role: RoleAdmin, ReadUserID: "alice"}
	every := Principal{Org: "acme", Role: RoleAdmin}
	forbidden := func(err error) bool {
		var he *httperr.Error
		return errors.As(err, &he) && he.Status == http.StatusForbidden && he.Code == httperr.CodePermissionDenied
	}
	if !alice.ActsOn("alice") || alice.ActsOn("bob") || !every.ActsOn("bob") {
		t.Fatal("ActsOn: a bound token acts on its user alone, an unbound one on anyone")
	}
	if alice.RequireUser("alice", "x") != nil || !forbidden(alice.RequireUser("bob", "x")) || every.RequireUser("bob", "x") != nil {
		t.Fatal("RequireUser: 403 for another user under a bound token only")
	}
	if !forbidden(alice.RequireEveryUser("x")) || every.RequireEveryUser("x") != nil {
		t.Fatal("RequireEveryUser: 403 for a bound token only")
	}
}

func TestDistinctNamespaces(t *testing.T) {
	if Distinct(nil) != nil {
		t.Fatal("nil (every namespace) must stay nil")
	}
	if got := Distinct([]string{"b", "a", "b", "a", "c"}); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("Distinct = %v", got)
	}
}
