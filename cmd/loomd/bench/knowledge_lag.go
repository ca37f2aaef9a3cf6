package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/loomplane/loom/client"
)

// probeWrite writes the i-th probe, holding word, and returns the check that a search
// finds it.
type probeWrite func(ctx context.Context, i int, word string) (found func(context.Context) (bool, error), err error)

// knowledgeLag measures commit→searchable for a document: from knowledge.add's answer
// until a knowledge.search for a word only that document holds finds it, beside the
// same for a memory (memory.set's answer until memory.search finds it), same run, at
// the sizes the scenario searched.
func (r *runner) knowledgeLag(ctx context.Context, res *ScenarioResult, ns, mns string, chunks int) error {
	doc, err := r.probeLoop(ctx, "knowledge.add until knowledge.search finds it", func(ctx context.Context, i int, word string) (func(context.Context) (bool, error), error) {
		uri := fmt.Sprintf("probes/probe-%d.md", i)
		text := fmt.Sprintf("# Probe %s\n\n%s %s\n", word, sentence(r.rng), word)
		if _, err := r.api.AddDocument(ctx, ns, client.DocumentInput{SourceURI: uri, Content: client.Text(text)}); err != nil {
			return nil, fmt.Errorf("add the probe document %s: %w", uri, err)
		}
		return func(ctx context.Context) (bool, error) {
			a, err := r.api.SearchKnowledge(ctx, ns, client.KnowledgeSearchRequest{Query: word, Limit: 10})
			if err != nil {
				return false, err
			}
			for _, h := range a.Hits {
				if h.SourceURI == uri {
					return true, nil
				}
			}
			return false, nil
		}, nil
	})
	if err != nil {
		return err
	}
	mem, err := r.probeLoop(ctx, "memory.set until memory.search finds it", func(ctx context.Context, i int, word string) (func(context.Context) (bool, error), error) {
		key := fmt.Sprintf("probe-%d", i)
		if _, err := r.api.Set(ctx, mns, key, client.SetRequest{Value: sentence(r.rng) + " " + word}); err != nil {
			return nil, fmt.Errorf("write the probe memory %s: %w", key, err)
		}
		return func(ctx context.Context) (bool, error) {
			a, err := r.api.Search(ctx, mns, client.SearchRequest{Query: word, TopK: 10})
			if err != nil {
				return false, err
			}
			for _, h := range a.Hits {
				if h.MemoryKey == key {
					return true, nil
				}
			}
			return false, nil
		}, nil
	})
	if err != nil {
		return err
	}
	res.compare(fmt.Sprintf("commit→searchable, a document among %d chunks (baseline: a memory among as many)", chunks), doc, mem, "probes/s")
	res.Notes = append(res.Notes, "commit→searchable: the clock starts when the write's answer arrives and stops when a search for a word "+
		"only the probe holds answers with it among its 10 hits; searches repeat every "+lagPoll.String()+
		", one probe at a time; both searches wait at their barriers, so the first search usually finds it")
	return nil
}

// probeLoop writes probes one after another for the run's duration and returns how
// long after each write's answer a search found it.
func (r *runner) probeLoop(ctx context.Context, label string, write probeWrite) (Sample, error) {
	var (
		mu   sync.Mutex
		took []time.Duration
	)
	run, err := r.closedLoop(ctx, label, 1, r.opts.Duration, func(ctx context.Context, _, i int) error {
		word := probeWord(i)
		found, err := write(ctx, i, word)
		if err != nil {
			return err
		}
		answered := time.Now()
		wctx, cancel := context.WithTimeout(ctx, lagTimeout)
		defer cancel()
		for {
			ok, err := found(wctx)
			if err != nil {
				return err
			}
			if ok {
				mu.Lock()
				took = append(took, time.Since(answered))
				mu.Unlock()
				return nil
			}
			select {
			case <-wctx.Done():
				return fmt.Errorf("%s: probe %s not found after %s: %w", label, word, lagTimeout, wctx.Err())
			case <-time.After(lagPoll):
			}
		}
	})
	if err != nil {
		return Sample{}, err
	}
	s := summarize(took, time.Duration(run.Seconds*float64(time.Second)))
	s.Errors, s.ErrorKinds = run.Errors, run.ErrorKinds
	return s, nil
}

// probeWord is a word of letters only that no generated sentence holds, one per probe.
func probeWord(i int) string {
	b := []byte("zqx")
	for {
		b = append(b, byte('a'+i%26))
		i /= 26
		if i == 0 {
			return string(b) + "vprobe"
		}
	}
}
