//! A value of a setting's type parsed from text, as its flag parses it: a `ValueEnum`'s names,
//! else its `FromStr`, and for a type that has neither (a list given whole, such as `--fault`'s)
//! a refusal; and the kind of numbers it is ([`kind`]), for a sweep's axis. Which one is chosen by the type, through method resolution: call
//! `(&&&Via::<T>(PhantomData)).parse(text)` with the three traits in scope, and the first of
//! `&&Via`, `&Via` and `Via` that `T` fits is taken.

/// The type a text is parsed to.
use std::any::TypeId;

use super::points::Kind;
use super::{Dur, Percent, Rate, Size};

/// The type a text is parsed to.
pub struct Via<T>(pub std::marker::PhantomData<T>);

/// A `ValueEnum`, by its names (first choice).
pub trait ByName<T> {
    fn parse(&self, s: &str) -> Result<T, String>;
}
impl<T: clap::ValueEnum> ByName<T> for &&Via<T> {
    fn parse(&self, s: &str) -> Result<T, String> {
        T::from_str(s, false)
    }
}

/// By its `FromStr`.
pub trait ByFromStr<T> {
    fn parse(&self, s: &str) -> Result<T, String>;
}
impl<T: std::str::FromStr<Err: std::fmt::Display>> ByFromStr<T> for &Via<T> {
    fn parse(&self, s: &str) -> Result<T, String> {
        s.parse().map_err(|e: T::Err| e.to_string())
    }
}

/// A list only the command line or a file gives whole (`--fault`'s grammar).
pub trait Whole<T> {
    fn parse(&self, s: &str) -> Result<T, String>;
}
impl<T> Whole<T> for Via<T> {
    fn parse(&self, _: &str) -> Result<T, String> {
        Err("is given whole, on the command line or in a scenario file".into())
    }
}

/// The kind of numbers a value of the type `t` is, if it is a number at all: what a sweep's
/// axis on a setting of that type steps through.
pub fn kind(t: TypeId) -> Option<Kind> {
    let is = |id: TypeId| t == id;
    let ints = [
        TypeId::of::<u64>(),
        TypeId::of::<u32>(),
        TypeId::of::<u16>(),
        TypeId::of::<u8>(),
        TypeId::of::<usize>(),
        TypeId::of::<i64>(),
        TypeId::of::<i32>(),
    ];
    Some(match () {
        _ if is(TypeId::of::<Rate>()) => Kind::Rate,
        _ if is(TypeId::of::<Percent>()) => Kind::Percent,
        _ if is(TypeId::of::<Dur>()) => Kind::Dur,
        _ if is(TypeId::of::<Size>()) => Kind::Size,
        _ if ints.into_iter().any(is) => Kind::Int,
        _ if is(TypeId::of::<f64>()) || is(TypeId::of::<f32>()) => Kind::Float,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::marker::PhantomData;

    use super::*;

    // The three references are how the type chooses its parser.
    #[allow(clippy::needless_borrow)]
    #[test]
    fn the_type_chooses_its_parser() {
        let d = (&&&Via::<crate::values::Dur>(PhantomData)).parse("250ms");
        assert_eq!(d.map(|d| d.0.as_millis()), Ok(250));
        let c = (&&&Via::<clap::ColorChoice>(PhantomData)).parse("never");
        assert_eq!(c, Ok(clap::ColorChoice::Never));
        assert!(
            (&&&Via::<clap::ColorChoice>(PhantomData))
                .parse("nope")
                .is_err()
        );
        assert!((&&&Via::<u32>(PhantomData)).parse("-3").is_err());
        let whole = (&&&Via::<Vec<u8>>(PhantomData)).parse("1");
        assert!(whole.unwrap_err().contains("given whole"));
    }
}
