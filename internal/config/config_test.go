package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) Lookup { return func(k string) string { return m[k] } }

func TestDefaultsRunAndServeNeedsTheStores(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.HTTPAddr != ":8080" || c.Topic != "loom.memory.revisions.v1" || c.PGProjectionWait != 5*time.Second || !c.HasRole("relay") {
		t.Fatalf("defaults: %+v", c)
	}
	err = c.RequireStores()
	for _, v := range []string{"LOOM_PG_DSN", "LOOM_CH_ADDR", "LOOM_KAFKA_BROKERS"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Fatalf("serve without stores: %v, want it to name %s", err, v)
		}
	}
	c, err = Load(env(map[string]string{"LOOM_PG_DSN": "postgres://x", "LOOM_CH_ADDR": "a:9000, b:9000", "LOOM_KAFKA_BROKERS": "k:9092"}))
	if err != nil || c.RequireStores() != nil || len(c.CHAddr) != 2 || c.CHAddr[1] != "b:9000" {
		t.Fatalf("stores: %+v %v", c, err)
	}
}

func TestMalformedSettingsAreNamed(t *testing.T) {
	for name, val := range map[string]string{
		"LOOM_PG_PROJECTION_WAIT_MS": "soon",
		"LOOM_BOOT_MIGRATE":          "perhaps",
		"LOOM_ROLES":                 "api,cron",
		"LOOM_EMBEDDER":              "magic",
		"LOOM_SEARCH_TOP_K_MAX":      "0",
		"LOOM_PROJECTION":            "has/slash",
	} {
		_, err := Load(env(map[string]string{name: val}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s=%s: %v, want an error naming the variable", name, val, err)
		}
	}
}
