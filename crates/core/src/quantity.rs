//! Energy, power, time and frequency as types, so that a joule is never added to a
//! watt: `Watts * Seconds` is `Joules`, `Joules / Seconds` is `Watts`, and a quantity
//! of one kind adds only to its own kind.
//!
//! They are the vocabulary's units: what a plan predicts, what a job asks for and what a
//! node measured carry them from layer to layer. Inside a model the arithmetic stays in
//! `f64` (`.0`), where a formula from a paper is easier to check as written. On the wire
//! and in stored records each is its bare number, so the types change no byte there.

use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, Sub, SubAssign};

use serde::{Deserialize, Serialize};

macro_rules! quantity {
    ($(#[$doc:meta])* $name:ident, $show:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl $name {
            /// The smaller of two quantities of this kind (as `f64::min`: a NaN loses).
            pub fn min(self, o: $name) -> $name {
                $name(self.0.min(o.0))
            }

            /// The larger of two quantities of this kind (as `f64::max`: a NaN loses).
            pub fn max(self, o: $name) -> $name {
                $name(self.0.max(o.0))
            }
        }

        impl Add for $name {
            type Output = $name;
            fn add(self, o: $name) -> $name {
                $name(self.0 + o.0)
            }
        }

        impl AddAssign for $name {
            fn add_assign(&mut self, o: $name) {
                self.0 += o.0;
            }
        }

        impl Sub for $name {
            type Output = $name;
            fn sub(self, o: $name) -> $name {
                $name(self.0 - o.0)
            }
        }

        impl SubAssign for $name {
            fn sub_assign(&mut self, o: $name) {
                self.0 -= o.0;
            }
        }

        impl Mul<f64> for $name {
            type Output = $name;
            fn mul(self, k: f64) -> $name {
                $name(self.0 * k)
            }
        }

        impl Div<f64> for $name {
            type Output = $name;
            fn div(self, k: f64) -> $name {
                $name(self.0 / k)
            }
        }

        /// The ratio of two quantities of one kind is a plain number.
        impl Div for $name {
            type Output = f64;
            fn div(self, o: $name) -> f64 {
                self.0 / o.0
            }
        }

        impl Sum for $name {
            fn sum<I: Iterator<Item = $name>>(it: I) -> $name {
                $name(it.map(|q| q.0).sum())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let show: fn(f64) -> String = $show;
                f.write_str(&show(self.0))
            }
        }
    };
}

quantity!(
    /// Energy in joules.
    Joules,
    crate::units::format_energy
);
quantity!(
    /// Power in watts.
    Watts,
    crate::units::format_power
);
quantity!(
    /// Time in seconds.
    Seconds,
    crate::units::format_duration
);
quantity!(
    /// A clock frequency in GHz.
    Ghz,
    |g| format!("{g:.2} GHz")
);

impl Mul<Seconds> for Watts {
    type Output = Joules;
    fn mul(self, t: Seconds) -> Joules {
        Joules(self.0 * t.0)
    }
}

impl Mul<Watts> for Seconds {
    type Output = Joules;
    fn mul(self, p: Watts) -> Joules {
        Joules(self.0 * p.0)
    }
}

impl Div<Seconds> for Joules {
    type Output = Watts;
    fn div(self, t: Seconds) -> Watts {
        Watts(self.0 / t.0)
    }
}

impl Div<Watts> for Joules {
    type Output = Seconds;
    fn div(self, p: Watts) -> Seconds {
        Seconds(self.0 / p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_combine_as_physics_says_and_print_as_reports_do() {
        let e = Watts(250.0) * Seconds(8.0);
        assert_eq!(e, Joules(2000.0));
        assert_eq!(Seconds(8.0) * Watts(250.0), e);
        assert_eq!(e / Seconds(8.0), Watts(250.0));
        assert_eq!(e / Watts(250.0), Seconds(8.0));
        assert_eq!(Joules(3.0) / Joules(2.0), 1.5);
        let mut left = Joules(10.0);
        left -= Joules(4.0);
        left += Joules(1.0);
        assert_eq!(left, Joules(7.0));
        assert_eq!(Watts(3.0).min(Watts(2.0)), Watts(2.0));
        assert_eq!(Watts(3.0).max(Watts(f64::NAN)), Watts(3.0));
        assert_eq!(
            [Joules(1.0), Joules(2.5)].into_iter().sum::<Joules>(),
            Joules(3.5)
        );
        assert_eq!(Joules(20e6).to_string(), "20.0 MJ");
        assert_eq!(Watts(1500.0).to_string(), "1.50 kW");
        assert_eq!(Seconds(3600.0).to_string(), "01:00:00");
        assert_eq!(Ghz(2.2).to_string(), "2.20 GHz");
        // The wire carries the bare number.
        assert_eq!(serde_json::to_string(&Joules(12.5)).unwrap(), "12.5");
        assert_eq!(serde_json::from_str::<Watts>("300").unwrap(), Watts(300.0));
    }
}
