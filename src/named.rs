//! Enums that the config file and the command line name by a word (`kind = "tract"`,
//! `--profile locked`): typed once, where the value comes in.
//!
//! `named_enum!` declares such an enum with its words. The enum's `FromStr` (written next to
//! it, with the message a user reads: the key and the allowed words) is the only parser:
//! serde reads the config through it, clap the flags. A wrong word in the file is reported
//! at its line, one on the command line by clap, both with the same message.

/// Declares a unit enum whose variants are named by words.
///
/// ```text
/// named_enum! {
///     /// `[engine] kind`.
///     pub enum EngineKind { Auto = "auto", Tract = "tract" }
/// }
/// ```
///
/// gives `Clone, Copy, Debug, PartialEq, Eq, Hash`, `ALL`, `name()`, `from_name()`,
/// `names(sep)`, `Display`, and serde's `Serialize` (the word) and `Deserialize` (through the
/// type's `FromStr`, which the caller writes).
macro_rules! named_enum {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every variant, in the order the docs list them.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The word that names this value in configs and on the command line.
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }

            /// The value named `word`, if any.
            pub fn from_name(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// The words, joined by `sep` (for messages).
            pub fn names(sep: &str) -> String {
                Self::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(sep)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let word = String::deserialize(d)?;
                word.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// A word that names none of an enum's values: the message gives the key and the words
/// that are allowed, e.g. `[engine] providers: 'tensorrtt' is not a provider: use tensorrt, cuda, cpu`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{context}'{word}'{what}: use {allowed}")]
pub struct UnknownName {
    /// Where the word was given, as the message starts: `[engine] kind: `.
    pub context: &'static str,
    /// The word as given.
    pub word: String,
    /// What the word is not, as the message goes on: ` is not a provider`, or empty.
    pub what: &'static str,
    /// The words that are allowed, as the message ends.
    pub allowed: String,
}

impl UnknownName {
    /// `word`, given for `context`, is not `what`; `allowed` lists the words that are.
    pub fn new(
        context: &'static str,
        word: &str,
        what: &'static str,
        allowed: impl Into<String>,
    ) -> UnknownName {
        UnknownName { context, word: word.to_string(), what, allowed: allowed.into() }
    }
}
