//! Checkpoints a running attempt saves and a later attempt of the run loads.

/// Saves checkpoint `$4` on run `$1`, only while `$3` holds it with token `$2` and it is `running`.
/// Answers how many rows matched (0 or 1).
pub(crate) const SAVE_CHECKPOINT: &str = "
WITH saved AS (
    UPDATE {schema}.job_runs
    SET checkpoint = $4
    WHERE id = $1 AND fencing_token = $2 AND owner = $3 AND status = 'running'
    RETURNING 1
)
SELECT count(*) FROM saved
";

/// The checkpoint of run `$1`.
pub(crate) const LOAD_CHECKPOINT: &str = "
SELECT checkpoint FROM {schema}.job_runs WHERE id = $1
";
