package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// mem0Memory is a memory as mem0's client hands it to its caller (keys camel-cased).
type mem0Memory struct {
	ID, Memory, Hash string
	UserID, AgentID  *string
	AppID, RunID     *string
	Metadata         map[string]any
	Categories       []string
	CreatedAt        time.Time
	UpdatedAt        time.Time
	Score            *float64
	Event, Text      string
	Data             struct{ Memory string }
	ExpirationDate   *string
	Immutable        bool
	Loom             struct{ Namespace, Key, VersionText, Status string }
}

type mem0Page struct {
	Count          int
	Next, Previous *string
	Results        []mem0Memory
}

type mem0Failure struct {
	Error struct{ Name, Message, Code string }
}

type mem0Run struct {
	Add, AddBob struct {
		Message, Status, EventID string
		Results                  []mem0Memory
	}
	AddInferred                      mem0Failure
	Search, SearchMetadata           struct{ Results []mem0Memory }
	GetAllPage1, GetAllAgent         mem0Page
	Get, Update, GetAfterUpdate      mem0Memory
	History                          []mem0History
	BatchUpdate, BatchDelete         struct{ Message string }
	Delete, DeleteAll                struct{ Message string }
	GetAfterDelete                   mem0Failure
	GetAllBobAfter, GetAllAliceAfter mem0Page
	BadFilter                        mem0Failure
}

type mem0History struct {
	ID, MemoryID, Event  string
	OldMemory, NewMemory *string
	UserID               *string
	Input                []struct{ Role, Content string }
	Metadata             map[string]any
}

// mem0's own MemoryClient (mem0ai on npm), host pointed at Loom's facade, through add,
// search with filters, getAll, get, update, history, batch update and delete, delete
// and deleteAll: every answer has the shape the client hands its caller.
func TestMem0Client(t *testing.T) {
	n, url := env.SharedAPI(t)
	token := env.Token(t, n, auth.NewToken{Org: "acme", Role: auth.RoleWriter})
	tag := testenv.Unique(t, "run")
	out := runNode(t, "mem0_client.mjs", nil, url+"/mem0", token, tag)
	var run mem0Run
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	alice, bob := "alice-"+tag, "bob-"+tag

	if run.Add.Status != "SUCCEEDED" || run.Add.EventID == "" || len(run.Add.Results) != 2 {
		t.Fatalf("add answered %+v", run.Add)
	}
	for i, want := range []string{"I live in Lisbon and I walk to work.", "Noted: you commute on foot in Lisbon."} {
		r := run.Add.Results[i]
		if r.Event != "ADD" || r.Memory != want || r.Data.Memory != want || r.ID == "" || deref(r.UserID) != alice || deref(r.AgentID) != "helper" ||
			r.Metadata["topic"] != "home" || r.Metadata["rank"] != float64(2) || r.Loom.Namespace != "mem0" {
			t.Errorf("add result %d: %+v", i, r)
		}
	}
	if !strings.Contains(run.AddInferred.Error.Message, "LOOM_MEM0_INFER") || run.AddInferred.Error.Code != "HTTP_503" {
		t.Errorf("an add with inference: %+v, want a 503 naming LOOM_MEM0_INFER", run.AddInferred.Error)
	}

	if len(run.Search.Results) == 0 || run.Search.Results[0].Memory != "I live in Lisbon and I walk to work." || run.Search.Results[0].Score == nil {
		t.Errorf("search for where alice lives: %+v", run.Search.Results)
	}
	for _, r := range run.Search.Results {
		if deref(r.UserID) != alice {
			t.Errorf("search filtered to %s answered %s's memory", alice, deref(r.UserID))
		}
	}
	if len(run.SearchMetadata.Results) != 1 || deref(run.SearchMetadata.Results[0].UserID) != bob {
		t.Errorf("search OR(alice, bob) with metadata topic=food: %+v, want bob's one memory", run.SearchMetadata.Results)
	}

	if run.GetAllPage1.Count != 2 || len(run.GetAllPage1.Results) != 1 || run.GetAllPage1.Next == nil || run.GetAllPage1.Previous != nil ||
		!strings.Contains(*run.GetAllPage1.Next, "page=2") {
		t.Errorf("getAll page 1 of size 1: %+v", run.GetAllPage1)
	}
	if run.GetAllAgent.Count != 2 {
		t.Errorf("getAll AND(agent helper, user in [alice]): count %d, want 2", run.GetAllAgent.Count)
	}

	id := run.Add.Results[0].ID
	if run.Get.ID != id || run.Get.Memory != "I live in Lisbon and I walk to work." || run.Get.CreatedAt.IsZero() || run.Get.Hash == "" {
		t.Errorf("get: %+v", run.Get)
	}
	if run.Update.ID != id || run.Update.Text != "I live in Porto now and I cycle to work." || run.GetAfterUpdate.Memory != run.Update.Text ||
		run.GetAfterUpdate.Metadata["rank"] != float64(3) {
		t.Errorf("update: %+v, then get: %+v", run.Update, run.GetAfterUpdate)
	}
	if len(run.History) != 2 || run.History[0].Event != "ADD" || run.History[1].Event != "UPDATE" ||
		deref(run.History[1].OldMemory) != "I live in Lisbon and I walk to work." || deref(run.History[1].NewMemory) != run.Update.Text ||
		run.History[0].MemoryID != id || len(run.History[0].Input) != 1 || run.History[0].Input[0].Role != "user" {
		t.Errorf("history: %+v", run.History)
	}
	if run.BatchUpdate.Message != "Successfully updated 1 memories" || run.BatchDelete.Message != "Successfully deleted 1 memories" {
		t.Errorf("batch: %+v %+v", run.BatchUpdate, run.BatchDelete)
	}
	if run.Delete.Message == "" || run.GetAfterDelete.Error.Name != "MemoryNotFoundError" {
		t.Errorf("delete %+v, then get: %+v, want MemoryNotFoundError", run.Delete, run.GetAfterDelete)
	}
	if run.DeleteAll.Message == "" || run.GetAllBobAfter.Count != 0 {
		t.Errorf("deleteAll(bob) %+v, then getAll(bob): %+v", run.DeleteAll, run.GetAllBobAfter)
	}
	if run.GetAllAliceAfter.Count != 0 {
		t.Errorf("alice's two memories deleted, getAll(alice): %+v", run.GetAllAliceAfter)
	}
	if run.BadFilter.Error.Name != "ValidationError" || !strings.Contains(run.BadFilter.Error.Message, "keywords") {
		t.Errorf("an unsupported filter: %+v, want a ValidationError naming it", run.BadFilter.Error)
	}

	// The add kept its messages in the conversation's record too, as fromMessages keeps
	// its transcript: recall by a question finds what alice said, with the reply after it,
	// though her memories were deleted since.
	recalled, err := testenv.NewClient(url, token).Typed(t).Recall(context.Background(), "mem0",
		client.RecallRequest{Query: "does alice walk to work in Lisbon?", Identity: client.Identity{UserID: alice, Agent: "helper"}, Window: intp(1)})
	if err != nil || len(recalled.Hits) == 0 {
		t.Fatalf("recall of the add's messages: %+v, %v", recalled, err)
	}
	if h := recalled.Hits[0]; h.Text != "I live in Lisbon and I walk to work." || h.Role != "user" ||
		strings.Join(texts(h.Window), " | ") != "I live in Lisbon and I walk to work. | Noted: you commute on foot in Lisbon." {
		t.Errorf("the add's turn: %+v, window %v", h.Turn, texts(h.Window))
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
