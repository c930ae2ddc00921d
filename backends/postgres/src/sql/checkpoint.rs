//! Checkpoints a running attempt saves and a later attempt of the run loads.

/// Saves checkpoint `$4` on run `$1`, only while `$3` holds it with token `$2`, it is `running` and
/// it is the run of slot (`$5`, `$6`, `$7`). Answers how many rows matched (0 or 1).
pub(crate) const SAVE_CHECKPOINT: &str = "
WITH saved AS (
    UPDATE {schema}.job_runs
    SET checkpoint = $4
    WHERE id = $1 AND fencing_token = $2 AND owner = $3 AND status = 'running'
      AND job_name = $5 AND scheduled_at = $6 AND partition_key = $7
    RETURNING 1
)
SELECT count(*) FROM saved
";

/// The checkpoint of run `$1`.
pub(crate) const LOAD_CHECKPOINT: &str = "
SELECT checkpoint FROM {schema}.job_runs WHERE id = $1
";
