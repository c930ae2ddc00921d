-- The head of a job's queue, on an index no other index can stand in for. Migration 18 gave the
-- index of active runs the columns of the slot key (job, slot, partition); on statistics taken
-- right after a bulk load, when every row is active, the two are the same size, and a claim's
-- generic plan could walk `job_runs_slot_key` instead, reading past every run finished since (30
-- to 150 ms a claim). Naming the job and the partition in the "C" collation (byte order, as the
-- rulebook orders them) gives this index an order and a key of its own: the head-of-queue reads
-- name it the same way, and the slot key, in the database's collation, can serve neither. Older
-- releases' reads fall back to the slot key until they are gone. Building it reads the table once,
-- under a lock that holds off writes meanwhile; it holds active rows only.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

DROP INDEX {schema}.job_runs_active_idx;
CREATE INDEX job_runs_active_idx
    ON {schema}.job_runs (job_name COLLATE "C", scheduled_at, partition_key COLLATE "C")
    WHERE status IN ('pending', 'abandoned', 'running');
