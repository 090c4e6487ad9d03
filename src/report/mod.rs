//! TODO(owner): report
