//! TODO(owner): daemon
