//! TODO(owner): store
