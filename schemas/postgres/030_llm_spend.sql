-- What model calls cost, per org, namespace and UTC day (internal/llm/spend): the
-- daily cost cap is read against it before every call, by every process. One row per
-- purpose and model a day, so a namespace's day is a handful of rows. Tokens and
-- dollars only: no prompt or answer text.
CREATE TABLE loom.llm_spend (
    org               text           NOT NULL,
    namespace         text           NOT NULL,
    day               date           NOT NULL,
    purpose           text           NOT NULL,
    model             text           NOT NULL,
    calls             bigint         NOT NULL DEFAULT 0,
    prompt_tokens     bigint         NOT NULL DEFAULT 0,
    completion_tokens bigint         NOT NULL DEFAULT 0,
    cost_usd          numeric(20, 9) NOT NULL DEFAULT 0,
    updated_at        timestamptz    NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, day, purpose, model)
);
