-- Namespace policy as data: each namespace's write configuration and its blacklist.
-- A change advances the org's policy generation (loom.scope_generations, scope '*'),
-- which every admission compares at its commit.

CREATE TABLE loom.namespaces (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    config     jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL DEFAULT '',
    PRIMARY KEY (org, namespace)
);

-- RE2 patterns a value may not match (422 BLACKLISTED).
CREATE TABLE loom.blacklist (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    pattern    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text        NOT NULL DEFAULT '',
    PRIMARY KEY (org, namespace, pattern)
);

-- Same-key reads across sessions and users: supersession under newest_wins, the
-- proposal guard that a key holds no one's established fact.
CREATE INDEX memory_current_by_key ON loom.memory_current (org, namespace, memory_key);
