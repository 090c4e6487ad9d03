//! TODO(owner): optimize
