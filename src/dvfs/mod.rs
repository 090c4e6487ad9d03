//! TODO(owner): dvfs
