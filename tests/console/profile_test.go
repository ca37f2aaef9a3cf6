package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// The agent context view shows the user's profile as profile.render answers it: in a
// namespace that opts in to profile_consolidation, the section of preferences the
// pass built (with the scripted model), cited by its row, beside the pack whose
// profile layer packs the same statement.
func TestConsoleShowsAUsersProfileSection(t *testing.T) {
	srv := llmtest.New(t)
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "profile_section" {
			return llmtest.Status(500, "unscripted")
		}
		return llmtest.JSON(map[string]any{"preferences": []string{"Prefers window seats"}, "decisions": []string{}})
	})
	n, url, _ := env.Serve(t, []string{"api", "workers"}, func(c *config.Config) {
		c.LLM.BaseURL, c.LLM.Model, c.LLM.DefaultPrice = srv.URL, "m", config.Price{}
		c.Workers.Resolver.Enabled, c.Workers.Entities.Enabled, c.Workers.Profiles.Enabled = false, false, false
		c.Workers.SessionDigest.Enabled = false
		c.Workers.ProfileConsolidation.Enabled, c.Workers.ProfileConsolidation.Interval = true, 100*time.Millisecond
	})
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "prof")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	admin.Configure(t, ns, map[string]any{"profile_consolidation": true})
	if r := admin.Put(t, ns, "seat", map[string]any{"value": "Ana prefers window seats", "user_id": "ana", "memory_type": "preference"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	testenv.Eventually(t, 60*time.Second, "ana's profile section built", func() bool {
		return admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/profiles/ana/render", nil).Status == http.StatusOK
	})

	b := newBrowser(t, url)
	b.signIn(admin.Token)
	b.open("#/ns/" + ns + "/context?user_id=ana&budget=200&sections=profile&run=1")
	b.wait(`#profile[data-citations="1"]`)
	b.shot("15-context-profile-section")
	if got := b.text("#profile-text"); !strings.Contains(got, "Prefers window seats") {
		t.Errorf("the profile shown:\n%s", got)
	}
	if got := b.text("#profile-citations"); !strings.HasPrefix(got, ns+"/profile_section:ana@") {
		t.Errorf("the profile's citations shown: %q; want the section's row", got)
	}
	if got := b.text(`#pack [data-section="profile"]`); !strings.Contains(got, "preference: Prefers window seats") {
		t.Errorf("the pack's profile layer shown:\n%s", got)
	}
}
