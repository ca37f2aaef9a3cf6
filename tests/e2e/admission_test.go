package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// The release gate "semantic admission" (docs/architecture.md): 16 concurrent writes
// of one fact under 16 keys end with exactly one new fact; the other 15 answer merge
// or duplicate, none lost and none a second live copy. Run 20 times.
func TestSemanticAdmission(t *testing.T) {
	// Two API processes: a writer meets the other process's commits in its gap without
	// their vectors, and measures them by embedding their text again.
	n, url := env.API(t, nil)
	_, url2 := env.API(t, nil)
	token := env.Token(t, n, auth.NewToken{Org: "acme"})
	clients := []*testenv.Client{testenv.NewClient(url, token), testenv.NewClient(url2, token)}
	pool := env.PG(t)
	for run := 0; run < 20; run++ {
		ns := testenv.Unique(t, fmt.Sprintf("adm%d", run))
		fact := fmt.Sprintf("the quarterly planning offsite %d is in porto in october", run)
		answers := make([]*testenv.Response, 16)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := json.Marshal(map[string]any{"value": fact})
				answers[i] = clients[i%2].Do(t, http.MethodPut, fmt.Sprintf("/v1/namespaces/%s/memories/offsite-%02d", ns, i), b)
			}()
		}
		wg.Wait()
		written, other := 0, map[string]int{}
		for i, r := range answers {
			if r.Status != http.StatusOK {
				t.Fatalf("run %d, writer %d: %d %s", run, i, r.Status, r.Body)
			}
			a := r.JSON(t)
			switch {
			case a["written"] == true && a["verdict"] == "new":
				written++
			case a["verdict"] == "merge" || a["verdict"] == "duplicate":
				other[a["verdict"].(string)]++
			default:
				t.Fatalf("run %d, writer %d answered %s", run, i, r.Body)
			}
		}
		live := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = 'acme' AND namespace = $1
			AND row->>'status' = 'active' AND NOT (row->>'tombstone')::bool`, ns)
		if written != 1 || live != 1 {
			t.Fatalf("run %d: %d new facts answered, %d live active rows; want exactly one (others: %v)", run, written, live, other)
		}
	}
}

// A pin racing a write of a new value on one key: either the write lands before the
// pin (and the pin covers the new value), or the write answers 409. A live value is
// never written over a pin it did not see.
func TestPinRacingAWrite(t *testing.T) {
	n, url := env.API(t, nil)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns := testenv.Unique(t, "pinrace")
	c.AppendOnly(t, ns)
	outcomes := map[string]int{}
	for i := 0; i < 40; i++ {
		key := fmt.Sprintf("k%02d", i)
		c.Set(t, ns, key, "before the race")
		var pin, write *testenv.Response
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			pin = c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/"+key+":pin", nil)
		}()
		go func() {
			defer wg.Done()
			write = c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, []byte(`{"value": "after the race"}`))
		}()
		wg.Wait()
		head := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/"+key, nil).JSON(t)
		switch {
		case pin.Status == http.StatusOK && write.Status == http.StatusOK:
			// The write landed first; the pin was built over it.
			if pin.JSON(t)["version"].(float64) <= write.JSON(t)["version"].(float64) || head["value"] != "after the race" || head["pinned"] != true {
				t.Fatalf("both answered 200 but the pin does not cover the write: pin %s write %s head %v", pin.Body, write.Body, head)
			}
			outcomes["write then pin"]++
		case pin.Status == http.StatusOK && write.Status == http.StatusConflict && write.ErrorCode() == "PINNED_CONFLICT":
			if head["value"] != "before the race" || head["pinned"] != true {
				t.Fatalf("the write was refused but the head is %v", head)
			}
			outcomes["pin then refused write"]++
		case pin.Status == http.StatusServiceUnavailable && pin.ErrorCode() == "ADMISSION_CONTENDED" && write.Status == http.StatusOK:
			// The pin was built over the old head and the write moved it: retryable.
			if head["value"] != "after the race" || head["pinned"] != false {
				t.Fatalf("the pin was refused but the head is %v", head)
			}
			outcomes["write, pin contended"]++
		default:
			t.Fatalf("pin %d %s, write %d %s", pin.Status, pin.Body, write.Status, write.Body)
		}
	}
	t.Logf("outcomes over 40 races: %v", outcomes)
}

// A policy change that lands between a write's read of the policy and its commit sends
// the write back: it is judged again under the new policy.
func TestPolicyChangeSendsAWriteBack(t *testing.T) {
	ns := testenv.Unique(t, "policy")
	var c *testenv.Client
	once := true
	n, url := env.API(t, nil, app.WithCommandFaults(command.Faults{BeforeCommit: func() {
		if once {
			once = false
			b := []byte(`{"pattern": "launch codes"}`)
			if r := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/blacklist", b); r.Status != http.StatusOK {
				t.Errorf("blacklist add: %d %s", r.Status, r.Body)
			}
		}
	}}))
	c = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	r := c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/k", []byte(`{"value": "the launch codes are in the safe"}`))
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "BLACKLISTED" {
		t.Fatalf("a write whose policy changed before its commit: %d %s", r.Status, r.Body)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE org = 'acme' AND namespace = $1`, ns); n != 0 {
		t.Fatalf("%d revisions committed", n)
	}
}
