//! Application state, stored by type.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;

/// State the application hands the scheduler, looked up by type in the job.
#[derive(Default, Clone)]
pub(crate) struct StateMap {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Arc::new(value));
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Result<&T, MissingState> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
            .ok_or(MissingState(type_name::<T>()))
    }
}

/// The job asked for state of a type the scheduler was not given with
/// [`SchedulerBuilder::state`](crate::SchedulerBuilder::state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no state of type `{0}` was given to the scheduler (SchedulerBuilder::state)")]
pub struct MissingState(pub &'static str);

impl std::fmt::Debug for StateMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMap")
            .field("types", &self.values.len())
            .finish()
    }
}
