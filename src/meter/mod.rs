//! TODO(owner): meter
