//! Arithmetic expressions in profiles and site configs, such as
//! `W_c: "2.1e9 * n / p"` or `dynamic_w: "95 * (f / 2.6)^3"`.
//!
//! An expression is parsed and checked once, when its file is loaded, and then
//! evaluated many times during a search. Integer literals are read as reals,
//! so `1/2` is 0.5, not 0.

use evalexpr::{ContextWithMutableVariables, DefaultNumericTypes, HashMapContext, Node, Value};

/// Functions an expression may call, by the name a person writes.
const FUNCTIONS: &[(&str, &str)] = &[
    ("ln", "math::ln"),
    ("log2", "math::log2"),
    ("log10", "math::log10"),
    ("exp", "math::exp"),
    ("sqrt", "math::sqrt"),
    ("cbrt", "math::cbrt"),
    ("pow", "math::pow"),
    ("abs", "math::abs"),
    ("min", "min"),
    ("max", "max"),
    ("floor", "floor"),
    ("ceil", "ceil"),
];

/// Why an expression in a profile or site config is refused, or gives no usable number;
/// each message quotes the expression so the person knows which line to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    /// The text is not an arithmetic expression.
    #[error("cannot parse expression '{expr}': {why}")]
    Syntax {
        /// The expression as written.
        expr: String,
        /// What the parser said.
        why: String,
    },
    /// The text assigns a variable, which a formula has no use for.
    #[error("expression '{expr}' assigns a variable; write a plain formula")]
    Assigns {
        /// The expression as written.
        expr: String,
    },
    /// The text uses a variable this kind of expression is not given.
    #[error("expression '{expr}' uses unknown variable '{name}'; allowed: {allowed}")]
    UnknownVariable {
        /// The expression as written.
        expr: String,
        /// The variable it uses.
        name: String,
        /// The variables it may use, comma-separated, or "none (a number)".
        allowed: String,
    },
    /// The text calls a function outside the short list greenup allows.
    #[error("expression '{expr}' calls unknown function '{name}'; allowed: {allowed}")]
    UnknownFunction {
        /// The expression as written.
        expr: String,
        /// The function it calls.
        name: String,
        /// The functions it may call, comma-separated.
        allowed: String,
    },
    /// A variable's value could not be handed to the evaluator.
    #[error("{why}")]
    Variable {
        /// What the evaluator said.
        why: String,
    },
    /// Evaluating the expression failed (a wrong argument count, a type mismatch).
    #[error("cannot evaluate '{expr}': {why}")]
    Eval {
        /// The expression as written.
        expr: String,
        /// What the evaluator said.
        why: String,
    },
    /// The expression gives something other than a number (a boolean, a string).
    #[error("expression '{expr}' does not give a number")]
    NotANumber {
        /// The expression as written.
        expr: String,
    },
    /// The expression gives infinity or NaN at these values, usually a division by zero.
    #[error("expression '{expr}' is {value} at {at}")]
    NotFinite {
        /// The expression as written.
        expr: String,
        /// What it gave.
        value: f64,
        /// The variables' values, as `name=value`, comma-separated.
        at: String,
    },
}

/// A parsed arithmetic expression over a fixed set of named variables.
#[derive(Debug, Clone)]
pub struct Expr {
    source: String,
    tree: Node<DefaultNumericTypes>,
    vars: Vec<String>,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.vars == other.vars
    }
}

impl Expr {
    /// Parse `source`, allowing only the variables in `vars`; the error says what is allowed.
    pub fn parse(source: &str, vars: &[&str]) -> Result<Expr, ExprError> {
        let text = reals(source);
        let mut tree =
            evalexpr::build_operator_tree::<DefaultNumericTypes>(&text).map_err(|e| {
                ExprError::Syntax {
                    expr: source.to_string(),
                    why: e.to_string(),
                }
            })?;
        if tree.iter_write_variable_identifiers().next().is_some() {
            return Err(ExprError::Assigns {
                expr: source.to_string(),
            });
        }
        for v in tree.iter_read_variable_identifiers() {
            if !vars.contains(&v) {
                return Err(ExprError::UnknownVariable {
                    expr: source.to_string(),
                    name: v.to_string(),
                    allowed: if vars.is_empty() {
                        "none (a number)".to_string()
                    } else {
                        vars.join(", ")
                    },
                });
            }
        }
        for name in tree.iter_function_identifiers_mut() {
            match FUNCTIONS.iter().find(|(k, _)| k == name) {
                Some((_, real)) => *name = (*real).to_string(),
                None => {
                    let allowed: Vec<&str> = FUNCTIONS.iter().map(|(k, _)| *k).collect();
                    return Err(ExprError::UnknownFunction {
                        expr: source.to_string(),
                        name: name.clone(),
                        allowed: allowed.join(", "),
                    });
                }
            }
        }
        Ok(Expr {
            source: source.to_string(),
            tree,
            vars: vars.iter().map(|s| s.to_string()).collect(),
        })
    }

    /// A constant, as if `value` had been written.
    pub fn constant(value: f64) -> Expr {
        Expr::parse(&format!("{value:?}"), &[]).unwrap_or_else(|_| unreachable_constant())
    }

    /// The text as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluate with `values` given in the order of the variables passed to [`Expr::parse`].
    pub fn eval(&self, values: &[f64]) -> Result<f64, ExprError> {
        let mut ctx = HashMapContext::<DefaultNumericTypes>::new();
        for (name, v) in self.vars.iter().zip(values) {
            ctx.set_value(name.clone(), Value::Float(*v))
                .map_err(|e| ExprError::Variable { why: e.to_string() })?;
        }
        let out = self
            .tree
            .eval_with_context(&ctx)
            .map_err(|e| ExprError::Eval {
                expr: self.source.clone(),
                why: e.to_string(),
            })?;
        let x = out.as_number().map_err(|_| ExprError::NotANumber {
            expr: self.source.clone(),
        })?;
        if x.is_finite() {
            Ok(x)
        } else {
            let at: Vec<String> = self
                .vars
                .iter()
                .zip(values)
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            Err(ExprError::NotFinite {
                expr: self.source.clone(),
                value: x,
                at: at.join(", "),
            })
        }
    }
}

/// `Expr::constant` formats a finite or non-finite float; both parse. Kept out of line so
/// the impossible branch has one obvious home.
#[cold]
fn unreachable_constant() -> Expr {
    Expr {
        source: "0.0".into(),
        tree: evalexpr::build_operator_tree("0.0").expect("literal parses"),
        vars: vec![],
    }
}

/// Rewrite integer literals as reals (`2` -> `2.0`) so that division never truncates.
fn reals(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 8);
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let starts_number = c.is_ascii_digit()
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.'));
        if starts_number {
            // Take the whole literal, exponent included, so that `1.14e-9` stays one number.
            let start = i;
            let digits = |i: &mut usize| {
                while *i < b.len() && b[*i].is_ascii_digit() {
                    *i += 1;
                }
            };
            digits(&mut i);
            let mut real = false;
            if b.get(i) == Some(&b'.') {
                real = true;
                i += 1;
                digits(&mut i);
            }
            if matches!(b.get(i), Some(b'e') | Some(b'E')) {
                let sign = usize::from(matches!(b.get(i + 1), Some(b'-') | Some(b'+')));
                if b.get(i + 1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                    real = true;
                    i += 1 + sign;
                    digits(&mut i);
                }
            }
            out.push_str(&s[start..i]);
            if !real {
                out.push_str(".0");
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_is_real() {
        let e = Expr::parse("1/2 + n/4", &["n"]).unwrap();
        assert_eq!(e.eval(&[2.0]).unwrap(), 1.0);
    }

    #[test]
    fn functions_and_powers() {
        let e = Expr::parse("log2(p) * f^3", &["p", "f"]).unwrap();
        assert!((e.eval(&[8.0, 2.0]).unwrap() - 24.0).abs() < 1e-12);
    }

    #[test]
    fn unknown_variable_is_named() {
        let err = Expr::parse("n * q", &["n", "p"]).unwrap_err().to_string();
        assert!(err.contains("'q'") && err.contains("n, p"), "{err}");
    }

    #[test]
    fn unknown_function_is_named() {
        let err = Expr::parse("system(1)", &[]).unwrap_err().to_string();
        assert!(err.contains("'system'"), "{err}");
    }

    #[test]
    fn assignment_is_refused() {
        assert!(Expr::parse("n = 3", &["n"]).is_err());
    }

    #[test]
    fn scientific_literals_survive() {
        let e = Expr::parse("2.5e9 / 1e9", &[]).unwrap();
        assert_eq!(e.eval(&[]).unwrap(), 2.5);
    }

    #[test]
    fn negative_exponents_stay_one_literal() {
        let e = Expr::parse("1.14e-9 / f + 2e-1 + 3E+2", &["f"]).unwrap();
        assert!((e.eval(&[2.0]).unwrap() - (0.57e-9 + 0.2 + 300.0)).abs() < 1e-12);
    }

    #[test]
    fn non_finite_is_an_error() {
        let e = Expr::parse("1 / n", &["n"]).unwrap();
        assert!(e.eval(&[0.0]).is_err());
    }
}
