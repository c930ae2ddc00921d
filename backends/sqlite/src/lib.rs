//! The sqlite backend of slotguard (being written).
