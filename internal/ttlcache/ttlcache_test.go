package ttlcache

import (
	"sync"
	"testing"
	"time"
)

func TestEntriesExpireAndTheSizeBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New[string, int](2, time.Second)
	c.now = func() time.Time { return now }
	c.Add("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("a fresh entry: %v %v", v, ok)
	}
	now = now.Add(time.Second)
	if _, ok := c.Get("a"); ok {
		t.Fatal("an entry answered at its expiry")
	}
	c.Add("a", 1)
	c.Add("b", 2)
	c.Add("c", 3)
	if _, ok := c.Get("a"); ok {
		t.Fatal("the least recently used entry outlived the size bound")
	}
	c.Purge()
	if _, ok := c.Get("c"); ok {
		t.Fatal("an entry outlived Purge")
	}
}

// The expirable LRU this replaces panicked under this pattern: short TTLs, purges and
// re-adds of the same keys from many goroutines.
func TestConcurrentUseWithPurges(t *testing.T) {
	c := New[int, int](8, time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 5000; i++ {
				c.Add(i%4, i)
				c.Get((i + g) % 4)
				if i%97 == 0 {
					c.Purge()
				}
				if i%31 == 0 {
					c.Remove(i % 4)
				}
			}
		}(g)
	}
	wg.Wait()
}
