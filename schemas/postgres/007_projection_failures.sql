-- Records a projection could not apply (a namespace's rows ClickHouse keeps refusing,
-- content its data key does not open), kept with their reason until the repair pass
-- applies them. A namespace with a row here is held: its later records are kept here
-- too (held = true) instead of being applied past the failure, so its watermark stays
-- below the first failed seq and its searches answer PROJECTION_BEHIND rather than
-- read a gap. Other namespaces carry on. The record stays on the topic, where the
-- repair reads it by its place: nothing of its content is kept here.
CREATE TABLE loom.projection_failures (
    projection       text        NOT NULL,
    org              text        NOT NULL,
    namespace        text        NOT NULL,
    seq              bigint      NOT NULL,
    topic            text        NOT NULL,
    record_partition integer     NOT NULL,
    record_offset    bigint      NOT NULL,
    held             boolean     NOT NULL,
    reason           text        NOT NULL,
    attempts         integer     NOT NULL DEFAULT 1,
    first_failed_at  timestamptz NOT NULL DEFAULT now(),
    last_failed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection, org, namespace, seq)
);
