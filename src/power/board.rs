//! Which Jetson this is: SoC, module, L4T and JetPack release, from
//! `/proc/device-tree/compatible`, `/proc/device-tree/model` and
//! `/etc/nv_tegra_release` (all read under the root that stands for `/`).

use std::fmt;
use std::path::Path;

/// Tegra SoC generations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Soc {
    /// Jetson Nano, TX1.
    T210,
    /// Jetson TX2.
    T186,
    /// Jetson Xavier (AGX, NX).
    T194,
    /// Jetson Orin (AGX, NX, Nano).
    T234,
    /// Jetson Thor.
    T264,
}

/// The board, as far as the files tell.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Board {
    /// SoC, when it is a Tegra.
    pub soc: Option<Soc>,
    /// `/proc/device-tree/model`.
    pub model: String,
    /// Module part number (`p3767-0005`), from the compatible strings.
    pub module: Option<String>,
    /// L4T release, e.g. `R36.4.3`.
    pub l4t: Option<String>,
    /// The JetPack release that L4T belongs to, e.g. `6.2`.
    pub jetpack: Option<String>,
}

fn read_nul_list(path: &Path) -> Vec<String> {
    std::fs::read(path)
        .map(|b| {
            b.split(|&c| c == 0)
                .map(|s| String::from_utf8_lossy(s).trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// JetPack release for an L4T release (major, minor).
fn jetpack_for(major: u32, minor: u32) -> Option<&'static str> {
    Some(match (major, minor) {
        (32, 5) => "4.5",
        (32, 6) => "4.6",
        (32, 7) => "4.6.x",
        (35, 1) => "5.0.2",
        (35, 2) => "5.1",
        (35, 3) => "5.1.1",
        (35, 4) => "5.1.2",
        (35, 5) => "5.1.3",
        (35, 6) => "5.1.4",
        (36, 2) => "6.0 DP",
        (36, 3) => "6.0",
        (36, 4) => "6.1/6.2",
        (38, 2) => "7.0",
        (38, _) => "7.x",
        (39, _) => "7.2",
        (32, _) => "4.x",
        (35, _) => "5.x",
        (36, _) => "6.x",
        _ => return None,
    })
}

impl Board {
    /// Reads the board description under `root`.
    pub fn detect(root: &Path) -> Board {
        let compatible = read_nul_list(&root.join("proc/device-tree/compatible"));
        let model = read_nul_list(&root.join("proc/device-tree/model")).join(" ");
        let soc = compatible.iter().find_map(|c| {
            Some(match c.as_str() {
                "nvidia,tegra210" => Soc::T210,
                "nvidia,tegra186" => Soc::T186,
                "nvidia,tegra194" => Soc::T194,
                "nvidia,tegra234" => Soc::T234,
                "nvidia,tegra264" => Soc::T264,
                _ => return None,
            })
        });
        let module = compatible.iter().find_map(|c| {
            let tail = c.strip_prefix("nvidia,")?;
            let part = tail.rsplit('+').next()?;
            (part.starts_with('p') && part.len() >= 5 && part[1..5].chars().all(|d| d.is_ascii_digit()))
                .then(|| part.to_string())
        });
        // "# R36 (release), REVISION: 4.3, GCID: ..."
        let (l4t, jetpack) = match std::fs::read_to_string(root.join("etc/nv_tegra_release")) {
            Ok(text) => {
                let major = text
                    .split_once("# R")
                    .and_then(|(_, r)| r.split_whitespace().next()?.parse::<u32>().ok());
                let rev = text
                    .split_once("REVISION:")
                    .map(|(_, r)| r.split(',').next().unwrap_or("").trim().to_string());
                match (major, rev) {
                    (Some(m), Some(r)) => {
                        let minor = r.split('.').next().and_then(|v| v.parse().ok()).unwrap_or(0);
                        (Some(format!("R{m}.{r}")), jetpack_for(m, minor).map(String::from))
                    }
                    _ => (None, None),
                }
            }
            Err(_) => (None, None),
        };
        Board { soc, model, module, l4t, jetpack }
    }

    /// True for a recognised Tegra board.
    pub fn is_jetson(&self) -> bool {
        self.soc.is_some()
    }
}

impl fmt::Display for Board {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.soc {
            Some(soc) => write!(
                f,
                "{} ({soc:?}{}), L4T {} (JetPack {})",
                if self.model.is_empty() { "Jetson" } else { &self.model },
                self.module.as_deref().map(|m| format!(", module {m}")).unwrap_or_default(),
                self.l4t.as_deref().unwrap_or("unknown"),
                self.jetpack.as_deref().unwrap_or("unknown")
            ),
            None => write!(
                f,
                "not a Jetson ({}): clock control is off, telemetry only",
                if self.model.is_empty() { "no device-tree model" } else { &self.model }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::jetpack_for;

    #[test]
    fn l4t_releases_map_to_their_jetpack() {
        // jtop's hw_detect table: R38.2 is JetPack 7.0, R39 JetPack 7.2.
        assert_eq!(jetpack_for(32, 7), Some("4.6.x"));
        assert_eq!(jetpack_for(36, 4), Some("6.1/6.2"));
        assert_eq!(jetpack_for(38, 2), Some("7.0"));
        assert_eq!(jetpack_for(39, 0), Some("7.2"));
        assert_eq!(jetpack_for(31, 1), None);
    }
}
