package config

import (
	"strings"
	"testing"
)

func TestWorkersAreOnWithAProviderUnlessTurnedOff(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers.Resolver.Enabled || c.Workers.Entities.Enabled {
		t.Fatalf("without a provider the workers are off: %+v", c.Workers)
	}
	r := c.Workers.Resolver
	if r.MinSimilarity != 0.60 || r.MaxPeers != 8 || r.RetireConfidence != 0.98 || r.FlagConfidence != 0.95 || r.ClearConfidence != 0.90 ||
		r.Batch != 40 || r.Concurrency != 8 {
		t.Fatalf("resolver defaults: %+v", r)
	}
	provider := map[string]string{"LOOM_LLM_BASE_URL": "http://localhost:11434/v1", "LOOM_LLM_MODEL": "m"}
	c, err = Load(env(provider))
	if err != nil || !c.Workers.Resolver.Enabled || !c.Workers.Entities.Enabled {
		t.Fatalf("with a provider both are on: %+v %v", c.Workers, err)
	}
	provider["LOOM_ENTITY_EXTRACTOR_ENABLED"] = "false"
	c, err = Load(env(provider))
	if err != nil || !c.Workers.Resolver.Enabled || c.Workers.Entities.Enabled {
		t.Fatalf("an explicit value wins: %+v %v", c.Workers, err)
	}
}

func TestResolverThresholdsAreRefusedOutOfOrder(t *testing.T) {
	for _, set := range []map[string]string{
		{"LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE": "0.96"},
		{"LOOM_MEMORY_CONFLICT_RESOLVER_FLAG_CONFIDENCE": "0.99"},
		{"LOOM_MEMORY_CONFLICT_RESOLVER_RETIRE_CONFIDENCE": "1.2"},
		{"LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE": "0"},
		// The seed refuses all but clear < flag < retire: an equal pair too.
		{"LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE": "0.95"},
		{"LOOM_MEMORY_CONFLICT_RESOLVER_FLAG_CONFIDENCE": "0.98"},
		{"LOOM_MEMORY_CONFLICT_RESOLVER_RETIRE_CONFIDENCE": "0.95", "LOOM_MEMORY_CONFLICT_RESOLVER_FLAG_CONFIDENCE": "0.95",
			"LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE": "0.95"},
	} {
		_, err := Load(env(set))
		if err == nil || !strings.Contains(err.Error(), "clear < flag < retire") {
			t.Errorf("%v: %v, want the thresholds' order refused", set, err)
		}
	}
	if _, err := Load(env(map[string]string{"LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED": "maybe"})); err == nil ||
		!strings.Contains(err.Error(), "LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED") {
		t.Errorf("a malformed switch: %v", err)
	}
	if _, err := Load(env(map[string]string{"LOOM_MEMORY_CONFLICT_RESOLVER_RETIRE_CONFIDENCE": "0.97",
		"LOOM_MEMORY_CONFLICT_RESOLVER_FLAG_CONFIDENCE": "0.96", "LOOM_MEMORY_CONFLICT_RESOLVER_CLEAR_CONFIDENCE": "0.95"})); err != nil {
		t.Errorf("thresholds strictly in order: %v", err)
	}
}

// The seed refuses the memory tables' ClickHouse retention at boot (postgres-authority.md,
// "Retention"): it is never ignored silently.
func TestTableRetentionOfTheMemoryTablesIsRefusedAtBoot(t *testing.T) {
	for _, name := range []string{"LOOM_RETENTION_MEMORY_DAYS", "LOOM_RETENTION_MEMORY_EMBEDDINGS_DAYS"} {
		_, err := Load(env(map[string]string{name: "30"}))
		if err == nil || !strings.Contains(err.Error(), name+" is refused") || !strings.Contains(err.Error(), "retention_days") {
			t.Errorf("%s=30: %v, want it refused naming retention_days", name, err)
		}
	}
	if _, err := Load(env(map[string]string{})); err != nil {
		t.Fatalf("unset, the boot goes on: %v", err)
	}
}

func TestPassPacingDefaultsAndRefusals(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Workers.Pacing; p.Concurrency != 1 || p.RestRatio != 3 {
		t.Fatalf("pacing defaults: %+v; want one pass at a time, a rest of 3× its time", p)
	}
	for _, set := range []map[string]string{{"LOOM_WORKERS_PASS_CONCURRENCY": "0"}, {"LOOM_WORKERS_PASS_REST_RATIO": "-1"}} {
		if _, err := Load(env(set)); err == nil || !strings.Contains(err.Error(), "LOOM_WORKERS_PASS") {
			t.Fatalf("%v: %v; want refused", set, err)
		}
	}
}
