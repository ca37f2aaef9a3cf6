-- The entity_communities pass (workers/entity_communities.go): clusters of each
-- namespace's co-occurrence graph (ClickHouse loom.entity_edges, open edges), found by
-- label propagation, one row per entity naming its community (the label its
-- community settled on) and the community's size. A pass replaces a namespace's rows
-- whole, in one transaction. Entity names only, as the graph holds them: an erasure
-- deletes the namespace's rows (the next pass recomputes them from what is left).
CREATE TABLE loom.entity_communities (
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    entity      text        NOT NULL,
    community   text        NOT NULL,
    size        integer     NOT NULL CHECK (size > 0),
    computed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, entity)
);
CREATE INDEX entity_communities_community ON loom.entity_communities (org, namespace, community);
