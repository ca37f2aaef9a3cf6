package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// WriteAnswer is how one write of a Writers run was answered.
type WriteAnswer struct {
	Key            string
	Status         int
	Code           string // the error code, "" on 200
	Version        string // version_text, on 200
	OutcomeUnknown bool   // the error's outcome_unknown
}

// Writers write new keys ("w<writer>-<n>") into one namespace from several goroutines
// until stopped, keeping every answer: the load a fault test breaks a store under.
type Writers struct {
	mu      sync.Mutex
	answers []WriteAnswer
	stop    chan struct{}
	wg      sync.WaitGroup
}

// StartWriters starts n writers of values "<text> <key>" into ns.
func StartWriters(t testing.TB, c *Client, ns, text string, n int) *Writers {
	w := &Writers{stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		w.wg.Add(1)
		go func(i int) {
			defer w.wg.Done()
			for j := 0; ; j++ {
				select {
				case <-w.stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", i, j)
				b, _ := json.Marshal(map[string]any{"value": text + " " + key})
				r := c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, b)
				a := WriteAnswer{Key: key, Status: r.Status, Code: r.ErrorCode()}
				body := r.JSON(t)
				if r.Status == http.StatusOK {
					a.Version, _ = body["version_text"].(string)
				} else if e, ok := body["error"].(map[string]any); ok {
					a.OutcomeUnknown = e["outcome_unknown"] == true
				}
				w.mu.Lock()
				w.answers = append(w.answers, a)
				w.mu.Unlock()
				if r.Status != http.StatusOK {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(i)
	}
	t.Cleanup(func() { w.Stop() })
	return w
}

// WaitFor waits until at least n writes were answered.
func (w *Writers) WaitFor(t testing.TB, n int) {
	t.Helper()
	Eventually(t, 10*time.Second, fmt.Sprintf("%d writes to be answered", n), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.answers) >= n
	})
}

// Stop stops the writers, waits for their last write, and returns every answer.
func (w *Writers) Stop() []WriteAnswer {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WriteAnswer{}, w.answers...)
}
