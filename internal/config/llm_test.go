package config

import (
	"strings"
	"testing"
	"time"
)

func TestLLMIsOffUntilABaseURLAndAModelAreSet(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.LLM.Configured() || c.LLM.DailyCostCapUSD != 1 || c.LLM.ResolverCapShare != 0.25 || c.LLM.Timeout != time.Minute {
		t.Fatalf("defaults: %+v", c.LLM)
	}
	if p := c.LLM.Prices["gpt-4o-mini"]; p.InputPerMTok != 0.15 || p.OutputPerMTok != 0.6 {
		t.Fatalf("default price of gpt-4o-mini: %+v", p)
	}
	c, err = Load(env(map[string]string{"LOOM_LLM_BASE_URL": "http://localhost:11434/v1", "LOOM_LLM_MODEL": "llama3.1",
		"LOOM_LLM_PRICES": "llama3.1=0/0, big = 3/15", "LOOM_LLM_DEFAULT_PRICE": "1/2"}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.LLM.Configured() || len(c.LLM.Prices) != 2 || c.LLM.Prices["big"].OutputPerMTok != 15 || c.LLM.DefaultPrice.InputPerMTok != 1 {
		t.Fatalf("configured: %+v", c.LLM)
	}
}

func TestMalformedLLMSettingsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		name string
	}{
		{map[string]string{"LOOM_LLM_API_KEY": "sk-x"}, "LOOM_LLM_BASE_URL"},
		{map[string]string{"LOOM_LLM_MODEL": "gpt-4o-mini"}, "LOOM_LLM_BASE_URL"},
		{map[string]string{"LOOM_LLM_BASE_URL": "https://api.openai.com/v1"}, "LOOM_LLM_MODEL"},
		{map[string]string{"LOOM_LLM_BASE_URL": "api.openai.com", "LOOM_LLM_MODEL": "m"}, "LOOM_LLM_BASE_URL"},
		{map[string]string{"LOOM_LLM_PRICES": "gpt-4o=cheap"}, "LOOM_LLM_PRICES"},
		{map[string]string{"LOOM_LLM_PRICES": "=1/2"}, "LOOM_LLM_PRICES"},
		{map[string]string{"LOOM_LLM_DEFAULT_PRICE": "-1/2"}, "LOOM_LLM_DEFAULT_PRICE"},
		{map[string]string{"LOOM_LLM_OPENAI_REASONING_EFFORT": "max"}, "LOOM_LLM_OPENAI_REASONING_EFFORT"},
		{map[string]string{"LOOM_LLM_CONCURRENCY": "0"}, "LOOM_LLM_CONCURRENCY"},
		{map[string]string{"LOOM_DEFAULT_DAILY_COST_CAP_USD": "-1"}, "LOOM_DEFAULT_DAILY_COST_CAP_USD"},
		{map[string]string{"LOOM_MEMORY_CONFLICT_RESOLVER_CAP_SHARE": "1.5"}, "LOOM_MEMORY_CONFLICT_RESOLVER_CAP_SHARE"},
	} {
		_, err := Load(env(tc.set))
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%v: %v, want an error naming %s", tc.set, err, tc.name)
		}
	}
}
