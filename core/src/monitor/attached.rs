//! [`Attached`]: a job's monitor as the runtime keeps it.

use std::sync::Arc;

use super::{Monitor, MonitorConfig};

/// A monitor attached to a job, with the settings derived from the job.
#[derive(Clone)]
pub(crate) struct Attached {
    pub(crate) monitor: Arc<dyn Monitor>,
    pub(crate) config: Arc<MonitorConfig>,
}
