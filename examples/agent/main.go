// Command agent is what an agent developer copies to give an agent Loom as its memory:
// it writes what it learns (and reads Loom's verdict on each write), answers a question
// from memory only when the search says a hit is relevant, abstains otherwise, and
// follows its writes on the change topic, as the service that reacts to them would.
//
//	LOOM_TOKEN=$(cat .loom/dev-token) go run ./examples/agent --api http://localhost:8080 --brokers 127.0.0.1:9092
//
// It uses only the public packages client and events, and franz-go for the topic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/events"
)

func main() {
	api := flag.String("api", "http://localhost:8080", "Loom's base URL")
	ns := flag.String("namespace", "agent-demo", "the namespace the agent remembers in")
	user := flag.String("user", "alice", "the user the agent talks to")
	brokers := flag.String("brokers", "", "Kafka seed brokers; set, follow the writes on the change topic")
	topic := flag.String("topic", events.DefaultTopic, "the change topic")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, *api, os.Getenv("LOOM_TOKEN"), *ns, *user, *brokers, *topic); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, api, token, ns, user, brokers, topic string) error {
	// Retry what Loom says is retryable (a projection a moment behind, a contended
	// write), with an Idempotency-Key on every write so a retry never writes twice.
	loom, err := client.New(api, token, client.WithRetry(client.Retry{MaxElapsed: 20 * time.Second, IdempotentWrites: true}))
	if err != nil {
		return err
	}
	me := client.Identity{Agent: "demo-agent", UserID: user}

	// 1. Remember what the conversation taught: one key per thing worth knowing.
	learned := map[string]string{
		"editor-theme": "the user prefers a dark theme in the editor",
		"home-city":    "the user lives in Lisbon",
		"coffee":       "the user drinks coffee black, no sugar",
	}
	seqs := map[int64]bool{}
	for _, key := range []string{"editor-theme", "home-city", "coffee"} {
		a, err := loom.Set(ctx, ns, key, client.SetRequest{Value: learned[key], Identity: me, MemoryType: "preference"})
		var le *client.Error
		switch {
		case errors.As(err, &le) && le.Code == client.CodePinnedConflict:
			fmt.Fprintf(out, "remember %s: refused, a pinned memory says otherwise\n", key)
			continue
		case err != nil:
			return fmt.Errorf("remember %s: %w", key, err)
		}
		fmt.Fprintf(out, "remember %s: written=%v verdict=%s version=%s\n", key, a.Written, a.Verdict, a.VersionText)
		if a.Written {
			seqs[a.Seq] = true
		}
	}

	// 2. Answer from memory only when the search says a hit is relevant.
	for _, q := range []string{"which theme does the user like in the editor?", "Oslo office quarterly revenue?"} {
		found, err := loom.Search(ctx, ns, client.SearchRequest{Query: q, UserID: user, TopK: 3})
		if err != nil {
			return fmt.Errorf("search %q: %w", q, err)
		}
		if found.Abstain() {
			fmt.Fprintf(out, "ask %q: abstain (%s): I don't know\n", q, found.Verdict)
			continue
		}
		var best string
		found.Hits[0].Decode(&best)
		fmt.Fprintf(out, "ask %q: answer from %s (relevance %.2f): %s\n", q, found.Hits[0].MemoryKey, found.Hits[0].Scores.Relevance, best)
	}

	// 3. Follow the writes on the change topic: one record per revision, keyed by
	// org/namespace, content sealed (fetched back through the API by memory_id).
	if brokers == "" {
		return nil
	}
	return follow(ctx, out, loom, strings.Split(brokers, ","), topic, ns, seqs)
}

func follow(ctx context.Context, out io.Writer, loom *client.Client, brokers []string, topic, ns string, want map[int64]bool) error {
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer kc.Close()
	for len(want) > 0 {
		fetches := kc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("the topic did not show seqs %v in time: %w", want, err)
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return ferr
		}
		for _, r := range fetches.Records() {
			e, err := events.Decode(r.Value)
			if err != nil || e.Namespace != ns || !want[e.Seq] {
				continue
			}
			delete(want, e.Seq)
			key := "?"
			if m, err := loom.GetByID(ctx, e.Revision.MemoryID); err == nil {
				key = m.MemoryKey
			}
			fmt.Fprintf(out, "topic: seq %d %s key=%s status=%s\n", e.Seq, e.Type, key, e.Revision.Status)
		}
	}
	return nil
}
