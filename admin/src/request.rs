//! Who asks for a change, and why: checked the same for every front end, stored in the audit trail.

use slotguard::store::AuditEntry;

use crate::AdminError;

/// The longest reason accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// The longest actor accepted, in bytes.
pub const MAX_ACTOR_BYTES: usize = 128;

/// Who asks for a change, and why. Both are stored in the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRequest {
    /// The person or system asking (1 to 128 bytes).
    pub actor: String,
    /// Why (1 to 1,024 bytes).
    pub reason: String,
}

impl ChangeRequest {
    /// A request by `actor` for `reason`.
    pub fn new(actor: impl Into<String>, reason: impl Into<String>) -> Self {
        ChangeRequest {
            actor: actor.into(),
            reason: reason.into(),
        }
    }

    /// Checks the actor and the reason against the limits every front end applies.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), AdminError> {
        check_text("actor", &self.actor, MAX_ACTOR_BYTES)?;
        check_text("reason", &self.reason, MAX_REASON_BYTES)
    }

    pub(crate) fn entry(&self, action: &str) -> Result<AuditEntry, AdminError> {
        self.validate()?;
        Ok(AuditEntry {
            action: action.to_owned(),
            actor: self.actor.clone(),
            reason: self.reason.clone(),
        })
    }
}

fn check_text(field: &'static str, value: &str, max: usize) -> Result<(), AdminError> {
    if value.trim().is_empty() {
        return Err(AdminError::Invalid {
            field,
            problem: "must not be empty".into(),
        });
    }
    if value.len() > max {
        return Err(AdminError::Invalid {
            field,
            problem: format!("is {} bytes; at most {max} are accepted", value.len()),
        });
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(AdminError::Invalid {
            field,
            problem: "contains control characters".into(),
        });
    }
    Ok(())
}
