-- A parked page is a search's ranked pool, kept ten minutes for its next pages: not worth
-- its write-ahead log, which made the insert most of a search's Postgres cost
-- (bench/RESULTS-index.md, Run D). An unlogged table is not replicated, and a crash
-- recovery or a failover empties it; a next page then answers that its token is unknown
-- and the caller searches again, as it does past the token's expiry.
ALTER TABLE loom.search_pages SET UNLOGGED;
