//! The postgres backend of slotguard (being written).
