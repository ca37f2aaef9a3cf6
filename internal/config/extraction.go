package config

import (
	"errors"
	"time"

	"github.com/loomplane/loom/events"
)

// Extraction tunes memory.set_from_messages and its deferred requests: the request
// topic, the extraction workers (a consumer group of it, run by the command role)
// and the transcript limits.
type Extraction struct {
	QueueEnabled   bool          // LOOM_EXTRACTION_QUEUE_ENABLED: this command process runs an extraction worker
	DeferAgents    []string      // LOOM_EXTRACTION_DEFER_AGENTS: agents whose requests are always deferred
	Topic          string        // LOOM_EXTRACTION_TOPIC
	TopicRetention time.Duration // LOOM_EXTRACTION_TOPIC_RETENTION_HOURS: when loomd creates the topic
	MaxAttempts    int           // LOOM_EXTRACTION_MAX_ATTEMPTS: counted failures before a request fails
	Lease          time.Duration // LOOM_EXTRACTION_LEASE_S: a worker's hold on a request, renewed while it runs
	RetryBase      time.Duration // LOOM_EXTRACTION_RETRY_BASE_MS: the backoff after a counted failure, doubled per attempt
	Poll           time.Duration // LOOM_EXTRACTION_POLL_MS: how often a worker queues records for due requests
	Concurrency    int           // LOOM_EXTRACTION_CONCURRENCY: partitions a worker runs at once
	SessionTimeout time.Duration // LOOM_EXTRACTION_SESSION_TIMEOUT_MS: how soon a dead worker's partitions move
	Pause          time.Duration // LOOM_EXTRACTION_PAUSE_MS: how long a worker waits after the provider refused its key or model
	Deadline       time.Duration // LOOM_EXTRACTION_DEADLINE_MS: one request's budget, model calls included
	WindowChars    int           // LOOM_EXTRACTION_WINDOW_CHARS: a transcript longer than this is extracted in windows
	MaxChars       int           // LOOM_EXTRACTION_MAX_CHARS: the longest transcript one request takes
	// KeepInputs: memory.set_from_messages, inline or deferred, keeps the transcript
	// it read in the conversation's record (LOOM_EXTRACTION_KEEP_INPUTS). Off, a
	// deployment keeps the facts alone: no turn, chunk or belief-source link of theirs.
	KeepInputs bool
}

func readExtraction(r *reader) Extraction {
	return Extraction{
		QueueEnabled:   r.bool("LOOM_EXTRACTION_QUEUE_ENABLED", true),
		DeferAgents:    r.list("LOOM_EXTRACTION_DEFER_AGENTS", ""),
		Topic:          r.str("LOOM_EXTRACTION_TOPIC", events.DefaultExtractionTopic),
		TopicRetention: time.Duration(r.int("LOOM_EXTRACTION_TOPIC_RETENTION_HOURS", 168)) * time.Hour,
		MaxAttempts:    r.int("LOOM_EXTRACTION_MAX_ATTEMPTS", 5),
		Lease:          r.seconds("LOOM_EXTRACTION_LEASE_S", 120),
		RetryBase:      r.ms("LOOM_EXTRACTION_RETRY_BASE_MS", 30000),
		Poll:           r.ms("LOOM_EXTRACTION_POLL_MS", 1000),
		Concurrency:    r.int("LOOM_EXTRACTION_CONCURRENCY", 4),
		SessionTimeout: r.ms("LOOM_EXTRACTION_SESSION_TIMEOUT_MS", 45000),
		Pause:          r.ms("LOOM_EXTRACTION_PAUSE_MS", 300000),
		Deadline:       r.ms("LOOM_EXTRACTION_DEADLINE_MS", 120000),
		WindowChars:    r.int("LOOM_EXTRACTION_WINDOW_CHARS", 24000),
		MaxChars:       r.int("LOOM_EXTRACTION_MAX_CHARS", 200000),
		KeepInputs:     r.bool("LOOM_EXTRACTION_KEEP_INPUTS", true),
	}
}

// Defers reports whether an agent's requests are always deferred.
func (e Extraction) Defers(agent string) bool {
	for _, a := range e.DeferAgents {
		if a == agent {
			return true
		}
	}
	return false
}

// Validate checks the extraction settings.
func (e Extraction) Validate() error {
	var errs []error
	if e.Topic == "" {
		errs = append(errs, errors.New("LOOM_EXTRACTION_TOPIC must not be empty"))
	}
	if e.TopicRetention <= 0 || e.MaxAttempts < 1 || e.Lease <= 0 || e.RetryBase <= 0 || e.Poll <= 0 || e.Concurrency < 1 ||
		e.SessionTimeout <= 0 || e.Pause <= 0 || e.Deadline <= 0 {
		errs = append(errs, errors.New("LOOM_EXTRACTION_TOPIC_RETENTION_HOURS, _MAX_ATTEMPTS, _LEASE_S, _RETRY_BASE_MS, _POLL_MS, "+
			"_CONCURRENCY, _SESSION_TIMEOUT_MS, _PAUSE_MS and _DEADLINE_MS must be positive"))
	}
	if e.WindowChars < 1000 || e.MaxChars < e.WindowChars {
		errs = append(errs, errors.New("LOOM_EXTRACTION_WINDOW_CHARS must be at least 1000 and at most LOOM_EXTRACTION_MAX_CHARS"))
	}
	return errors.Join(errs...)
}
