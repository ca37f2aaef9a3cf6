package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/loomplane/loom/events"
)

// seen is the last seq handled per namespace. A namespace's seqs are its
// generations, so one number per namespace tells a duplicate (at or below it) from
// the next event and from a gap.
type seen struct {
	file  string
	seqs  map[string]int64 // events.RecordKey → last handled seq
	dirty bool
}

func loadSeen(file string) (*seen, error) {
	s := &seen{file: file, seqs: map[string]int64{}}
	if file == "" {
		return s, nil
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", file, err)
	}
	if err := json.Unmarshal(b, &s.seqs); err != nil {
		return nil, fmt.Errorf("read state %s: %w", file, err)
	}
	return s, nil
}

func (s *seen) last(org, namespace string) int64 {
	return s.seqs[string(events.RecordKey(org, namespace))]
}

func (s *seen) mark(org, namespace string, seq int64) {
	s.seqs[string(events.RecordKey(org, namespace))] = seq
	s.dirty = true
}

// save writes the state beside the file and renames it over, so a crash leaves the
// old state or the new one, never half of one.
func (s *seen) save() error {
	if s.file == "" || !s.dirty {
		return nil
	}
	b, err := json.Marshal(s.seqs)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.file), ".consumer-state-*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.file); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	s.dirty = false
	return nil
}
