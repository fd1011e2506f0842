//! Class names: from a names file (one per line), from the model's own
//! metadata (ultralytics exports store `names` as `{0: 'person', 1: 'bicycle'}`),
//! or `class<N>` when neither is given.

use std::path::Path;

/// The names of a model's classes, in class-id order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassNames {
    names: Vec<String>,
    /// Where the names came from, for messages.
    pub origin: String,
}

/// Why a names file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NamesError {
    /// The file could not be read.
    #[error("{}: cannot read class names: {source}", path.display())]
    Read {
        /// The names file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file names no class.
    #[error("{}: no class names in the file (one name per line)", path.display())]
    Empty {
        /// The names file.
        path: std::path::PathBuf,
    },
}

impl ClassNames {
    /// Reads a names file: one name per line; blank lines and `#` comments are skipped.
    pub fn from_file(path: &Path) -> Result<ClassNames, NamesError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| NamesError::Read { path: path.to_path_buf(), source })?;
        let names: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(String::from)
            .collect();
        if names.is_empty() {
            return Err(NamesError::Empty { path: path.to_path_buf() });
        }
        Ok(ClassNames { names, origin: path.display().to_string() })
    }

    /// Parses ultralytics' `names` metadata: a Python dict literal `{0: 'a', 1: "b"}`.
    pub fn from_metadata(text: &str) -> Option<ClassNames> {
        let body = text.trim().strip_prefix('{')?.strip_suffix('}')?;
        let mut names: Vec<(usize, String)> = Vec::new();
        let mut rest = body.trim();
        while !rest.is_empty() {
            let (key, after) = rest.split_once(':')?;
            let id: usize = key.trim().parse().ok()?;
            let after = after.trim_start();
            let quote = after.chars().next().filter(|c| *c == '\'' || *c == '"')?;
            let close = after[1..].find(quote)? + 1;
            names.push((id, after[1..close].to_string()));
            rest = after[close + 1..].trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        names.sort();
        let ordered = names.iter().enumerate().all(|(i, (id, _))| i == *id);
        (ordered && !names.is_empty()).then(|| ClassNames {
            names: names.into_iter().map(|(_, n)| n).collect(),
            origin: "model metadata".to_string(),
        })
    }

    /// `class0`, `class1`, ... for models without names.
    pub fn numbered(count: usize) -> ClassNames {
        ClassNames { names: (0..count).map(|i| format!("class{i}")).collect(), origin: "numbered".into() }
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when there are no names.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name of class `id`, or `class<id>` when out of range.
    pub fn name(&self, id: usize) -> std::borrow::Cow<'_, str> {
        match self.names.get(id) {
            Some(n) => n.as_str().into(),
            None => format!("class{id}").into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ultralytics_metadata() {
        let n = ClassNames::from_metadata("{0: 'box', 1: \"ball\", 2: 'traffic cone'}").unwrap();
        assert_eq!((n.len(), n.name(2).as_ref()), (3, "traffic cone"));
        assert_eq!(n.name(7), "class7");
        assert!(ClassNames::from_metadata("{1: 'a'}").is_none(), "ids must start at 0");
        assert!(ClassNames::from_metadata("['a', 'b']").is_none());
        assert!(ClassNames::from_metadata("{0: a}").is_none());
    }

    #[test]
    fn names_file_skips_blanks_and_comments() {
        let p = std::env::temp_dir().join(format!("jd-names-{}", std::process::id()));
        std::fs::write(&p, "# obstacles\nbox\n\n ball \ncone\n").unwrap();
        let n = ClassNames::from_file(&p).unwrap();
        assert_eq!((n.len(), n.name(1).as_ref()), (3, "ball"));
        std::fs::write(&p, "\n# nothing\n").unwrap();
        assert!(ClassNames::from_file(&p).unwrap_err().to_string().contains("no class names"));
        let e = ClassNames::from_file(Path::new("/nonexistent/x.names")).unwrap_err();
        assert!(e.to_string().contains("cannot read"));
        assert!(std::error::Error::source(&e).is_some(), "the io::Error is kept");
    }
}
