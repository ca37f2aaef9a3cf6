package main

import (
	"fmt"

	"github.com/loomplane/loom/internal/config"
)

// llmBanner tells a developer whether model calls (extraction, memory.ask, the
// conflict resolver) reach a provider, and how to point them at one.
func llmBanner(c config.LLM) string {
	if c.Configured() {
		return fmt.Sprintf("  # model calls go to %s (model %s; at most $%g a namespace a day: LOOM_DEFAULT_DAILY_COST_CAP_USD)", c.BaseURL, c.Model, c.DailyCostCapUSD)
	}
	return `  # model calls (extraction, memory.ask, the conflict resolver) are off: their routes answer
  # 503 LLM_NOT_CONFIGURED. Point them at OpenAI, or at a local Ollama (ollama pull llama3.1):
  LOOM_LLM_BASE_URL=https://api.openai.com/v1 LOOM_LLM_API_KEY=sk-... LOOM_LLM_MODEL=gpt-4o-mini ./bin/loomd dev
  LOOM_LLM_BASE_URL=http://localhost:11434/v1 LOOM_LLM_MODEL=llama3.1 LOOM_LLM_DEFAULT_PRICE=0/0 ./bin/loomd dev`
}
