package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command/extraction"
)

// An operator's registered step (register_step) runs where a request names it in its
// pipeline, and drops the facts it says to, with its name and reason in the answer;
// a request that does not name it runs without it; a step no operator registered is
// a 422 naming the field and the steps there are.
func TestRegisteredExtractionStep(t *testing.T) {
	var steps extraction.Steps
	seen := 0
	if err := steps.Register("acme.drop_card_numbers", func(_ context.Context, in extraction.StepInput) ([]string, error) {
		seen = len(in.Facts)
		drop := make([]string, len(in.Facts))
		for i, f := range in.Facts {
			if strings.Contains(f.Value, "card") {
				drop[i] = "acme keeps no payment details"
			}
		}
		return drop, nil
	}); err != nil {
		t.Fatal(err)
	}
	e := newExtractionEnv(t, nil, app.WithExtractionSteps(&steps))
	ctx := context.Background()
	msgs := []client.Message{{Role: "user", Content: "I pay with my Visa card ending 4242, and I prefer window seats."}}
	e.srv.ReplyWhen(isExtraction,
		extracted([]said{{"user.payment_card", "Pays with a Visa card ending 4242", 0}, {"user.seat", "Prefers window seats", 0}}),
		extracted([]said{{"user.payment_card", "Pays with a Visa card ending 4242", 0}}))

	named, err := e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Messages: msgs,
		Steps: []string{"loom.llm_extract", "acme.drop_card_numbers", "loom.hash_dedup", "loom.bulk_write"}})
	if err != nil {
		t.Fatal(err)
	}
	facts := byKey(named)
	if card := facts["user.payment_card"]; card.Verdict != "dropped" || card.DroppedBy != "acme.drop_card_numbers" ||
		card.Reason != "acme keeps no payment details" || card.MemoryID != "" {
		t.Errorf("the card fact: %+v", card)
	}
	if seat := facts["user.seat"]; seat.MemoryID == "" || seat.Verdict != "new" {
		t.Errorf("the seat fact: %+v", seat)
	}
	if seen != 2 {
		t.Errorf("the step saw %d facts, want 2", seen)
	}
	var ran []string
	for _, s := range named.Steps {
		ran = append(ran, s.Name)
	}
	if strings.Join(ran, ",") != "loom.llm_extract,acme.drop_card_numbers,loom.hash_dedup,loom.bulk_write" {
		t.Errorf("the steps run: %v", ran)
	}

	plain, err := e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Messages: msgs, Identity: client.Identity{UserID: "bob"}})
	if err != nil || byKey(plain)["user.payment_card"].MemoryID == "" {
		t.Errorf("a request that does not name the step: %+v, %v", plain, err)
	}

	var ce *client.Error
	_, err = e.tc.FromMessages(ctx, e.ns, client.FromMessagesRequest{Messages: msgs, Steps: []string{"loom.llm_extract", "acme.unregistered"}})
	if !errors.As(err, &ce) || ce.Status != 422 || ce.Field != "steps" || !strings.Contains(ce.Message, "acme.drop_card_numbers") {
		t.Errorf("an unregistered step: %v", err)
	}
}
