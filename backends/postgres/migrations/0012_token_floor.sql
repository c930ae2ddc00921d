-- Fencing tokens that never repeat, even when the database goes back in time: after a failover to
-- an asynchronous standby the commits of the last moments are lost, and with them the sequence's
-- last values, so `nextval` would hand out tokens that were already granted on the old primary.
-- Every new connection of a replica calls `raise_token_floor()`, which moves the sequence to at
-- least the server's clock in microseconds (tokens rise by one per claim, far slower than a clock
-- in microseconds, so the floor is always above every token granted before it). Writers of the
-- floor are serialized by a transaction-scoped advisory lock, so the sequence never moves back.
-- It also answers what a replica needs to notice a failover: the value before the raise, the
-- cluster's system identifier and the current WAL timeline (NULL on a standby).
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

CREATE FUNCTION {schema}.raise_token_floor(
    OUT before bigint, OUT floor bigint, OUT system_identifier bigint, OUT timeline text)
LANGUAGE plpgsql AS $$
BEGIN
    -- ASCII `tokn`, and the schema: one floor writer per schema at a time.
    PERFORM pg_advisory_xact_lock(1953459054, hashtext('{schema}'));
    SELECT s.last_value INTO before FROM {schema}.fencing_tokens s;
    floor := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
    IF before < floor THEN
        PERFORM setval('{schema}.fencing_tokens', floor);
    ELSE
        floor := before;
    END IF;
    SELECT c.system_identifier INTO system_identifier FROM pg_control_system() c;
    IF NOT pg_is_in_recovery() THEN
        timeline := substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8);
    END IF;
END
$$;
