-- The generations of the ClickHouse projection tables (internal/tableset): the one the
-- query side reads (loom.<table>), the one a rebuild is building beside it
-- (loom.<table>__g<building>, for the projection named in building_for, whose
-- watermarks the switch replaces), and the ones kept under their generation's names
-- after a switch until they are dropped. One row: the tables are the deployment's.
-- next is never handed out twice, so no generation's table names (nor, on a cluster,
-- their Keeper paths) are ever reused.
CREATE TABLE loom.projection_tables (
    id             boolean     PRIMARY KEY DEFAULT true CHECK (id),
    serving        integer     NOT NULL DEFAULT 1,
    building       integer,
    building_for   text,
    building_since timestamptz,
    retired        integer[]   NOT NULL DEFAULT '{}',
    next           integer     NOT NULL DEFAULT 2,
    switched_at    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((building IS NULL) = (building_for IS NULL))
);
INSERT INTO loom.projection_tables DEFAULT VALUES;
